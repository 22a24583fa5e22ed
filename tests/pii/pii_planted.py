"""Text with planted personal data in varied formats, inside prose, code and logs.

Each document is a list of pieces; planted values know their entity type, so tests
know exactly which characters are personal data and which are not.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field

import phonenumbers


@dataclass
class Planted:
    text: str
    values: list[tuple[int, int, str]] = field(default_factory=list)  # start, end, entity

    def add(self, piece: str, entity: str | None = None) -> None:
        if entity is not None:
            self.values.append((len(self.text), len(self.text) + len(piece), entity))
        self.text += piece


FIRST = ["jane", "Omar", "li.wei", "maria-jose", "O'Neil", "k_smith", "ZOE", "anna"]
DOMAINS = ["example.com", "mail.example.co.uk", "corp.example.org", "dept.uni.example.edu",
           "example.io", "sub.domain.example.de"]  # fmt: skip
TAGS = ["news", "x-1", "list", "2026"]


def email(rng: random.Random) -> str:
    local = rng.choice(FIRST) + rng.choice(["", ".", "_", ""]) + rng.choice(["doe", "k", "99", ""])
    local = local.strip("._-") or "a"
    if rng.random() < 0.4:
        local += "+" + rng.choice(TAGS)
    value = f"{local}@{rng.choice(DOMAINS)}"
    return value.upper() if rng.random() < 0.1 else value


_REGIONS = ["US", "GB", "DE", "FR", "IN", "BR", "CA", "IL"]
_FORMATS = [phonenumbers.PhoneNumberFormat.NATIONAL, phonenumbers.PhoneNumberFormat.INTERNATIONAL,
            phonenumbers.PhoneNumberFormat.E164]  # fmt: skip


def phone(rng: random.Random) -> str:
    while True:
        region = rng.choice(_REGIONS)
        kind = rng.choice(
            [phonenumbers.PhoneNumberType.FIXED_LINE, phonenumbers.PhoneNumberType.MOBILE]
        )
        example = phonenumbers.example_number_for_type(region, kind)
        if example is None:
            continue
        digits = str(example.national_number)
        keep = max(3, len(digits) - 4)
        nsn = digits[:keep] + "".join(rng.choice(string.digits) for _ in digits[keep:])
        number = (
            phonenumbers.parse(nsn, region)
            if region != "IL"
            else phonenumbers.parse("0" + nsn, region)
        )
        if not phonenumbers.is_valid_number(number):
            continue
        text = phonenumbers.format_number(number, rng.choice(_FORMATS))
        if region == "US" and rng.random() < 0.3:
            text = f"{nsn[:3]}-{nsn[3:6]}-{nsn[6:]}"
        return text


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    total = 0
    for i, d in enumerate(reversed(body)):
        n = int(d)
        if i % 2 == 0:
            n *= 2
            n -= 9 if n > 9 else 0
        total += n
    return body + str((10 - total % 10) % 10)


def card(rng: random.Random) -> str:
    number = _luhn_complete(rng.choice(["4", "51", "52", "55", "6011"]), 16, rng)
    sep = rng.choice(["", " ", "-"])
    return sep.join(number[i : i + 4] for i in range(0, 16, 4))


_IBAN_LEN = {"DE": 22, "GB": 22, "FR": 27, "NL": 18, "ES": 24, "IT": 27}


def iban(rng: random.Random) -> str:
    country = rng.choice(list(_IBAN_LEN))
    n = _IBAN_LEN[country]
    if country == "GB" or country == "NL":
        bban = "".join(rng.choice(string.ascii_uppercase) for _ in range(4))
        bban += "".join(rng.choice(string.digits) for _ in range(n - 8))
    elif country == "IT":
        bban = rng.choice(string.ascii_uppercase) + "".join(
            rng.choice(string.digits) for _ in range(n - 5)
        )
    else:
        bban = "".join(rng.choice(string.digits) for _ in range(n - 4))
    rearranged = bban + country + "00"
    numeric = "".join(str(int(c, 36)) for c in rearranged)
    check = 98 - int(numeric) % 97
    value = f"{country}{check:02d}{bban}"
    if rng.random() < 0.5:
        value = " ".join(value[i : i + 4] for i in range(0, len(value), 4))
    return value


def ip(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return ".".join(str(rng.randint(1, 254)) for _ in range(4))
    groups = [f"{rng.randint(0, 0xFFFF):x}" for _ in range(8)]
    if rng.random() < 0.5:
        return ":".join(groups)
    return ":".join(groups[:3]) + "::" + ":".join(groups[6:])


MAKERS = {"EMAIL_ADDRESS": email, "PHONE_NUMBER": phone, "CREDIT_CARD": card, "IBAN_CODE": iban,
          "IP_ADDRESS": ip}  # fmt: skip

TEMPLATES = [
    "Please contact {v} if the build breaks again; the release notes are in docs/RELEASE.md.\n",
    "    config['{k}'] = \"{v}\"  # set by deploy.sh, see issue #1234\n",
    '{{"user": "u{n}", "{k}": "{v}", "retries": 3, "version": "2.14.1"}}\n',
    "2026-03-{d:02d} 10:2{n}:17 INFO accepted {k} {v} for session 7f3a9c2e (took 12 ms)\n",
    "Mit freundlichen Grüßen — für Rückfragen: {v}. Überweisung bis 15.04.2026.\n",
    "name,{k},amount\nrow{n},{v},{n}9.50\n",
    "Notre équipe à Montréal répond au {v} du lundi au vendredi, 9 h – 17 h.\n",
    "<li>{k}: <code>{v}</code></li>\n",
]
FILLER = [
    "The parser keeps offsets in code points; see section 4.2 of RFC 3629 and version 1.2.3.\n",
    "Run `make -j4 test` and compare the checksum 9f86d081884c7d659a2feaa0c55ad015 with 0x7fff.\n",
    "Changes in 3.11.7 (2023-12-04): fixed CVE-2023-40217, bumped zlib to 1.3 for 64-bit builds.\n",
    "Naïve café owners in Zürich paid 1 234,56 € on 12/31/2025 at 23:59:59 for 3 × 4 m² of tiles.\n",
    "def area(r: float) -> float:\n    return 3.14159 * r ** 2  # ~ 78.54 for r = 5\n",
]


def document(rng: random.Random, values: int = 6) -> Planted:
    doc = Planted("")
    for _ in range(values):
        if rng.random() < 0.5:
            doc.add(rng.choice(FILLER))
        entity = rng.choice(list(MAKERS))
        template = rng.choice(TEMPLATES)
        before, _, after = template.partition("{v}")
        fmt = {"k": entity.lower(), "n": rng.randint(0, 9), "d": rng.randint(1, 28)}
        doc.add(before.format(**fmt))
        doc.add(MAKERS[entity](rng), entity)
        doc.add(after.format(**fmt))
    return doc


def corpus(n: int, seed: int = 4) -> list[Planted]:
    rng = random.Random(seed)
    return [document(rng) for _ in range(n)]
