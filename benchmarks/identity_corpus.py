"""The generated corpus of the byte-identity check: 22 MB of JSONL, the same bytes on any machine.

benchmarks/corpus.py reads text found on the machine (man pages, docs, Python sources),
which is right for speed but would make the identity check's input depend on what is
installed. This one is made from a seeded random generator only, and plants what the
build path must carry through unchanged: text normalize changes (decomposed accents,
CRLF, control characters, runs of blank lines), documents filter_length rejects, exact
copies and near-copies for the two dedups (the copies land in other files and
partitions, so the barriers have work across workers), a malformed JSON line and a
non-string text per file and documents without an id (all quarantined), and documents
up to 60 KB so partitions of 1 MB end mid-file.

Run ``python -m benchmarks.identity_corpus OUT_DIR`` to write it (the identity check
does this itself, once per cache).
"""

from __future__ import annotations

import argparse
import json
import random
import unicodedata
from pathlib import Path

MB = 1_000_000
SIZE_BYTES = 22 * MB
FILE_BYTES = 2_500_000
SEED = 20261203
# Bump when the generator changes, so cached corpora (and the outputs built from them)
# are made anew.
FORMAT = 1

_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"
_ACCENTED = ["café", "naïve", "résumé", "Zürich", "São", "façade", "Ångström", "über"]
_OTHER_SCRIPTS = ["東京", "данные", "δεδομένα", "داده", "데이터", "🙂"]


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    words = set()
    while len(words) < size:
        syllables = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
        words.add("".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables)))
    stop = ["the", "of", "and", "to", "in", "is", "that", "it", "with", "as", "for", "was"]
    return stop + sorted(words)


class _Writer:
    """Sequential part-NN.jsonl files of about FILE_BYTES each."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index = -1
        self.handle = None
        self.bytes_in_file = 0
        self.total = 0

    def write(self, line: bytes) -> None:
        if self.handle is None or self.bytes_in_file >= FILE_BYTES:
            self._next()
        assert self.handle is not None
        self.handle.write(line)
        self.bytes_in_file += len(line)
        self.total += len(line)

    def _next(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.index += 1
        self.handle = open(self.folder / f"part-{self.index:02d}.jsonl", "wb")  # noqa: SIM115
        self.bytes_in_file = 0
        # Every file starts with what must be quarantined: a malformed line and a text
        # that is not a string.
        self.handle.write(b'{"id": "broken-%d", "text": "no closing quote\n' % self.index)
        self.handle.write(b'{"id": "int-%d", "text": %d}\n' % (self.index, self.index))

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


def _document(rng: random.Random, vocab: list[str], weights: list[float]) -> str:
    length = int(min(rng.paretovariate(1.2) * 60, 9000))  # words: mostly short, a long tail
    words = rng.choices(vocab, weights, k=length)
    out: list[str] = []
    for i, word in enumerate(words):
        roll = rng.random()
        if roll < 0.01:
            word = rng.choice(_ACCENTED)
        elif roll < 0.013:
            word = rng.choice(_OTHER_SCRIPTS)
        out.append(word)
        if i % rng.randint(8, 20) == 0 and i:
            out[-1] += rng.choice((".", ".", ",", "?", ";"))
        if i % rng.randint(60, 200) == 0 and i:
            out[-1] += rng.choice(("\n", "\n\n", "\n\n\n\n"))
    text = " ".join(out)
    flavour = rng.random()
    if flavour < 0.08:
        text = unicodedata.normalize("NFD", text)  # normalize's NFC changes it back
    elif flavour < 0.14:
        text = text.replace("\n", "\r\n")
    elif flavour < 0.16:
        text = text + "\x07  \t"
    return text


def write(folder: Path) -> dict[str, int]:
    """Write the corpus into folder (emptied first) and return its counts."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.jsonl"):
        old.unlink()
    rng = random.Random(SEED)
    vocab = _vocabulary(rng)
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]  # Zipf
    writer = _Writer(folder)
    kept: list[str] = []
    counts = {"documents": 0, "copies": 0, "near_copies": 0, "short": 0, "no_id": 0}
    n = 0
    while writer.total < SIZE_BYTES:
        roll = rng.random()
        record: dict[str, object] = {"id": f"doc-{n:07d}"}
        if roll < 0.07 and kept:
            record["text"] = rng.choice(kept)
            counts["copies"] += 1
        elif roll < 0.11 and kept:
            words = rng.choice(kept).split(" ")
            words[rng.randrange(len(words))] = rng.choice(vocab)
            record["text"] = " ".join(words)
            counts["near_copies"] += 1
        elif roll < 0.14:
            record["text"] = " ".join(rng.choices(vocab, k=rng.randint(0, 3)))
            counts["short"] += 1
        else:
            text = _document(rng, vocab, weights)
            record["text"] = text
            if rng.random() < 0.05 and len(text) < 20000:
                kept.append(text)
        if rng.random() < 0.01:
            del record["id"]  # quarantined: the recipe names an id field
            counts["no_id"] += 1
        record["source"] = rng.choice(("web", "books", "code"))
        writer.write((json.dumps(record, ensure_ascii=rng.random() < 0.5) + "\n").encode())
        counts["documents"] += 1
        n += 1
    writer.close()
    counts["bytes"] = writer.total
    counts["files"] = writer.index + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    print(write(args.out))


if __name__ == "__main__":
    main()
