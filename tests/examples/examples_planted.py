"""A corpus with personal data planted where examples could pick it up: in documents a
filter removes, in exact and near duplicates and the documents they duplicate, in a
document the pii stage drops, in ids and in the `url` and `source` fields; and the recipe
that runs it through normalize, a filter, exact dedup, MinHash, pii and a last filter.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from conftest import corpus, write_jsonl

import curate

FILTERED_EMAIL = "ines.moreau@filtered-example.fr"
DUPLICATE_PHONE = "(201) 555-0144"
NEAR_EMAIL = "k.osei@near-example.gh"
DROPPED_CARD = "4111 1111 1111 1111"
DROPPED_EMAIL = "a.kowalski@dropped-example.pl"
URL_EMAIL = "r.tanaka@url-example.jp"
SOURCE_EMAIL = "l.fischer@source-example.de"
ID_EMAIL = "s.haddad@id-example.lb"
PLANTED = (FILTERED_EMAIL, DUPLICATE_PHONE, NEAR_EMAIL, DROPPED_CARD, DROPPED_EMAIL, URL_EMAIL,
           SOURCE_EMAIL, ID_EMAIL)  # fmt: skip
"""Every value no example, report or `curate show` may hold."""

NEAR = (
    "The quarterly review of the harbour ferry timetable found that the morning boats ran "
    "late on most days of the winter, and the committee asked {} to write the report"
)


def records() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for d in corpus(240, dup_every=6):
        d["url"] = f"https://example.org/{d['id']}"
        d["source"] = "crawl"
        docs.append(d)
    docs[3]["url"] = f"https://example.org/u/{URL_EMAIL}"
    docs[4]["source"] = f"export by {SOURCE_EMAIL}"
    docs[7]["id"] = f"user-{ID_EMAIL}"
    docs[7]["text"] = "short"  # removed by the filter, id and all
    duplicate = f"Call the front desk on {DUPLICATE_PHONE} to move the appointment to Monday."
    docs += [
        {"id": "f1", "text": f"write {FILTERED_EMAIL}", "url": f"mailto:{URL_EMAIL}",
         "source": SOURCE_EMAIL},
        {"id": "x1", "text": duplicate, "url": "u", "source": "crawl"},
        {"id": "x2", "text": duplicate, "url": f"https://example.org/{URL_EMAIL}",
         "source": SOURCE_EMAIL},
        {"id": "n1", "text": NEAR.format(NEAR_EMAIL) + " today.", "url": "u", "source": "s"},
        {"id": "n2", "text": NEAR.format(NEAR_EMAIL) + " tomorrow.", "url": "u", "source": "s"},
        {"id": "c1", "text": f"Card {DROPPED_CARD} belongs to {DROPPED_EMAIL}, who paid the "
         "invoice for the ferry tickets last week.", "url": "u", "source": "s"},
    ]  # fmt: skip
    return docs


STAGES: list[dict[str, Any]] = [
    {"normalize": {}},
    {"filter_length": {"min_words": 4}},
    {"exact_dedup": {}},
    {"minhash_dedup": {"threshold": 0.7}},
    {"pii": {"entities": {"EMAIL_ADDRESS": "redact", "PHONE_NUMBER": "mask",
                          "CREDIT_CARD": "drop_document"}}},
    {"filter_length": {"min_words": 10}},
]  # fmt: skip


def recipe(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "planted",
        "inputs": ["data/a.jsonl", "data/b.jsonl"],
        "id_field": "id",
        "fields": {"url": "string", "source": "string"},
        "partition_size": "6KB",
        "batch_size": "2KB",
        "stages": copy.deepcopy(STAGES),
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }
    data.update(overrides)
    return data


def make_data(folder: Path) -> None:
    docs = records()
    write_jsonl(folder / "data" / "a.jsonl", docs[:150])
    write_jsonl(folder / "data" / "b.jsonl", docs[150:])


def build(folder: Path, data: dict[str, Any], root: str = "out") -> curate.Version:
    data = copy.deepcopy(data)
    data["output"]["root"] = root
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return curate.run(path)


def leaks(blob: str | bytes) -> list[str]:
    """The planted values `blob` holds, raw or escaped as JSON or HTML would."""
    import html
    import json

    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    found = []
    for value in PLANTED:
        forms = {value, json.dumps(value)[1:-1], html.escape(value), html.escape(value, False)}
        forms |= {value.replace("@", "&#64;"), value.replace("@", "\\u0040")}
        if any(f in text for f in forms):
            found.append(value)
    return found
