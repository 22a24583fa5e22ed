"""Versions to report on, built once per session: a corpus with planted personal data in
the text and in metadata fields (`url`, `source`, the id), in documents kept, removed by a
filter, removed as duplicates and quarantined, so a report that showed any of it would
be caught; and a second version of the same recipe with one threshold changed, to
compare with the first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, corpus

import curate

EMAIL = "rosalind.vega@clinic-example.org"
PHONE = "(201) 555-0123"
IP = "198.51.100.23"
URL_EMAIL = "h.okafor@patients-example.net"
SOURCE_EMAIL = "m.lindqvist@records-example.se"
ID_EMAIL = "t.nakamura@ids-example.jp"
REMOVED_EMAIL = "p.dubois@removed-example.fr"
DUPLICATE_PHONE = "(201) 555-0187"
QUARANTINED_IP = "203.0.113.201"
PLANTED = (EMAIL, PHONE, IP, URL_EMAIL, SOURCE_EMAIL, ID_EMAIL, REMOVED_EMAIL, DUPLICATE_PHONE,
           QUARANTINED_IP)  # fmt: skip
"""Every value a report must never hold."""


def planted_records() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {**d, "source": "crawl", "url": f"https://example.org/{d['id']}"} for d in corpus(60)
    ]
    docs[12]["text"] = (
        f"The clinic asks every patient to write to {EMAIL} or to call {PHONE} before a visit; "
        f"the booking server at {IP} answers questions about the schedule all day and night."
    )
    docs[11]["url"] = f"https://portal.example.org/users/{URL_EMAIL}?from={IP}"
    docs[10]["source"] = f"export by {SOURCE_EMAIL}"
    docs[16]["id"] = f"user-{ID_EMAIL}"
    duplicate = f"Reach the desk on {DUPLICATE_PHONE} for the records of last week, said the note."
    docs += [
        {"id": "r1", "text": f"{REMOVED_EMAIL} thanks", "source": "crawl", "url": "u"},
        {"id": "p1", "text": duplicate, "source": "crawl", "url": f"mailto:{REMOVED_EMAIL}"},
        {"id": "p2", "text": duplicate, "source": SOURCE_EMAIL, "url": "u"},
    ]
    return docs


def build(folder: Path, min_chars: int) -> curate.Version:
    """The planted corpus through normalize, filters, exact dedup, pii and tokenize; the last
    filter's `min_chars` is what a second version changes (so only it and tokenize rerun)."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in planted_records()]
    lines.append('{"id": "q1", "text": "the gateway at ' + QUARANTINED_IP)  # malformed JSON
    (data / "a.jsonl").write_text("\n".join(lines) + "\n")
    recipe = {
        "name": "planted",
        "inputs": ["data/*.jsonl"],
        "id_field": "id",
        "fields": {"source": "string", "url": "string"},
        "on_error": "quarantine",
        "stages": [
            {"normalize": {}},
            {"filter_length": {"min_words": 3}},
            {
                "quality_filter": {  # rules with thresholds, drawn on their distributions
                    "gopher_quality": {"min_doc_words": 8, "min_stop_words": 0},
                    "gopher_repetition": {"top_ngram_char_frac": {}},
                    "c4": False,
                    "fineweb": False,
                }
            },
            {"exact_dedup": {}},
            {"pii": {}},
            {"filter_length": {"min_chars": min_chars}},
            {"tokenize": {"source": str(REPO / "sample_data" / "tokenizer"), "keep_text": True}},
        ],
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return curate.run(path)


_BUILT: dict[str, tuple[curate.Version, curate.Version]] = {}


def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[curate.Version, curate.Version]:
    """v1, and v2 with the last filter's threshold raised: same inputs, fewer documents.
    Built once per session, for whichever test module asks first (each has a fixture
    calling this)."""
    if "versions" not in _BUILT:
        folder = tmp_path_factory.mktemp("planted")
        v1 = build(folder, 40)
        v2 = build(folder, 80)
        assert (v1.name, v2.name) == ("v1", "v2")
        table = v1.to_arrow()  # the planted values reached the data, where pii left them
        text = "\n".join(table.column("text").to_pylist())
        assert EMAIL not in text and PHONE not in text and IP not in text  # pii redacted them
        assert any(URL_EMAIL in u for u in table.column("url").to_pylist())
        assert any(SOURCE_EMAIL in u for u in table.column("source").to_pylist())
        assert f"user-{ID_EMAIL}" in table.column("id").to_pylist()
        assert v1.counts["quarantined"] == 1
        removed = v1.manifest["counts"]["removed"]
        assert (
            removed["1:filter_length"] and removed["3:exact_dedup"] and removed["2:quality_filter"]
        )
        assert v1.manifest["stages"][4]["changed"] >= 1  # the planted text reached pii
        _BUILT["versions"] = (v1, v2)
    return _BUILT["versions"]
