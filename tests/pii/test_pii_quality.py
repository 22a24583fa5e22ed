"""Recall and over-redaction at the default configuration, on planted and on real text.

Planted values in varied formats (national and international phone numbers, e-mails
with plus-tags and subdomains, cards with spaces and dashes, IBANs, IPv4 and IPv6) sit
inside prose, code, logs, CSV and HTML. A value counts as removed when every one of its
characters is inside a replaced span. Over-redaction is the share of characters outside
planted values that are replaced.
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest
from pii_planted import corpus

from curate.pii.spans import final_spans
from curate.stages.pii import DEFAULT_ENTITIES, PiiParams

pytest.importorskip("presidio_analyzer")

RECALL = {"EMAIL_ADDRESS": 0.99, "PHONE_NUMBER": 0.95, "CREDIT_CARD": 0.95, "IBAN_CODE": 0.95,
          "IP_ADDRESS": 0.95}  # fmt: skip


@pytest.fixture(scope="module")
def analysis():
    from curate.pii.analyzer import Analysis, AnalyzerConfig

    p = PiiParams()
    return Analysis(AnalyzerConfig(tuple(p.languages), tuple(DEFAULT_ENTITIES), p.score_threshold))


def covered(analysis, text: str) -> tuple[bytearray, list]:
    spans = final_spans(text, analysis.analyze(text)[0])
    mask = bytearray(len(text))
    for s in spans:
        mask[s.start : s.end] = b"\x01" * (s.end - s.start)
    return mask, spans


def test_recall_and_over_redaction_on_planted_text(analysis) -> None:
    found, total = Counter(), Counter()
    outside = changed_outside = 0
    for doc in corpus(120):
        mask, _ = covered(analysis, doc.text)
        planted = bytearray(len(doc.text))
        for start, end, entity in doc.values:
            total[entity] += 1
            found[entity] += all(mask[start:end])
            planted[start:end] = b"\x01" * (end - start)
        outside += planted.count(0)
        changed_outside += sum(1 for m, p in zip(mask, planted, strict=True) if m and not p)
    recall = {e: found[e] / total[e] for e in total}
    print("recall", recall, "over-redaction", changed_outside / outside)
    for entity, floor in RECALL.items():
        assert recall[entity] >= floor, (entity, recall[entity])
    assert changed_outside / outside <= 0.01


def _real_documentation(limit: int) -> list[str]:
    """Changelogs and man pages on this machine (full of versions, dates and hex)."""
    texts, size = [], 0
    paths = sorted(Path("/usr/share/doc").glob("*/changelog*.gz"))[:40]
    paths += sorted(Path("/usr/share/man/man1").glob("*.1.gz"))[:60]
    for path in paths:
        try:
            text = gzip.decompress(path.read_bytes()).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text[:20000])
        size += len(texts[-1])
        if size > limit:
            break
    return texts


def test_over_redaction_on_real_documentation(analysis) -> None:
    texts = _real_documentation(150_000)
    if len(texts) < 10:
        pytest.skip("no changelogs or man pages on this machine")
    chars = sum(len(t) for t in texts)
    by_entity: Counter[str] = Counter()
    for text in texts:
        _, spans = covered(analysis, text)
        for s in spans:
            by_entity[s.entity] += s.end - s.start
    print("real text:", chars, "chars;", dict(by_entity))
    # E-mail addresses in changelogs are real maintainers' addresses: personal data, rightly
    # removed. Everything else replaced there is counted as damage.
    damage = sum(n for e, n in by_entity.items() if e != "EMAIL_ADDRESS")
    assert damage / chars <= 0.01
