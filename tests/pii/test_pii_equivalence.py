"""The stage's fast path finds exactly what plain Presidio finds on every whole document.

Fast path = the phone recognizer's shared scan and remembered verdicts, pattern
recognizers on trigger slices, and the per-document gates that skip entities (or whole
documents) with no trigger. Reference = Presidio's own recognizers, `AnalyzerEngine.analyze`
on the whole text, then `AnonymizerEngine.anonymize`. Corpus: planted values in prose and
code, real text from this repository, and fuzzed strings built from the characters the
recognizers care about (Unicode digits, case-folding letters, separators, fragments of
real values).
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest
from pii_planted import MAKERS, corpus

from curate.pii.keys import token
from curate.stages.base import StageContext
from curate.stages.pii import DEFAULT_ENTITIES, Pii, PiiParams

pytest.importorskip("presidio_analyzer")
pytest.importorskip("presidio_anonymizer")

REPO = Path(__file__).resolve().parents[2]
ENTITIES = (*tuple(DEFAULT_ENTITIES), "US_BANK_NUMBER", "URL", "MAC_ADDRESS", "UK_NHS")
KEY = "k" * 32


@pytest.fixture(scope="module")
def analyzers():
    from curate.pii.analyzer import Analysis, AnalyzerConfig

    fast = Analysis(AnalyzerConfig(("en",), ENTITIES, 0.0))
    plain = Analysis(AnalyzerConfig(("en",), ENTITIES, 0.0, fast=False))
    return fast, plain


FUZZ = "0123456789٣３@.:-_ /%+()[]#x\nKſİıéßabcdefABCDEF,;='\"\t"


def fuzzed(rng: random.Random, n: int) -> list[str]:
    pieces = [m(rng) for m in MAKERS.values() for _ in range(3)]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.35:
                value = rng.choice(pieces)
                cut = rng.randint(0, len(value))
                parts.append(value[:cut] if rng.random() < 0.3 else value)
            else:
                parts.append("".join(rng.choice(FUZZ) for _ in range(rng.randint(0, 25))))
        out.append("".join(parts))
    return out


def varied_texts() -> list[str]:
    rng = random.Random(11)
    texts = [d.text for d in corpus(40, seed=12)] + fuzzed(rng, 300)
    for path in [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "curate" / "pii" / "phone.py"]:
        texts.append(path.read_text(encoding="utf-8")[:20000])
    texts += ["", " ", "@", "::", "1.2", "a@b.c", "１２３４５６７８９０", "+1 (212) 555-0100 x12"]
    return texts


def test_fast_analysis_equals_plain_presidio(analyzers) -> None:
    fast, plain = analyzers
    for text in varied_texts():
        got = [(s.start, s.end, s.entity, s.score) for s in fast.analyze(text)[0]]
        want = [(s.start, s.end, s.entity, s.score) for s in plain.analyze(text)[0]]
        assert got == want, text
    # and again, now that the phone verdicts are remembered
    for text in varied_texts()[:40]:
        assert [vars(s) for s in fast.analyze(text)[0]] == [vars(s) for s in plain.analyze(text)[0]]


def test_stage_output_equals_presidio_analyze_then_anonymize(analyzers, monkeypatch) -> None:
    from presidio_anonymizer import AnonymizerEngine
    from presidio_anonymizer.entities import OperatorConfig

    monkeypatch.setenv("CURATE_PII_KEY", KEY)
    actions = {"EMAIL_ADDRESS": "hash", "PHONE_NUMBER": "mask", "IP_ADDRESS": "redact",
               "CREDIT_CARD": "mask", "IBAN_CODE": "hash", "US_SSN": "redact",
               "CRYPTO": "redact"}  # fmt: skip
    stage = Pii(PiiParams(entities=actions, score_threshold=0.4), StageContext())
    stage.setup()
    texts = [t for t in varied_texts()[::2] if t]
    batch = pa.RecordBatch.from_pylist([{"id": str(i), "text": t} for i, t in enumerate(texts)])
    out = stage.process(batch).batch.column("text").to_pylist()

    _, plain = analyzers
    engine = AnonymizerEngine()
    ops = {}
    for entity, action in actions.items():
        if action == "redact":
            ops[entity] = OperatorConfig("replace")
        elif action == "mask":
            ops[entity] = OperatorConfig("mask", {"masking_char": "*", "chars_to_mask": 10**9,
                                                  "from_end": False})  # fmt: skip
        else:
            ops[entity] = OperatorConfig(
                "custom", {"lambda": lambda v, e=entity: token(KEY.encode(), e, v, 16)}
            )
    for text, got in zip(texts, out, strict=True):
        results = plain.engine.analyze(
            text, language="en", entities=list(actions), score_threshold=0.4
        )
        assert got == engine.anonymize(text, results, ops).text


def test_documents_without_triggers_are_not_analysed() -> None:
    from curate.pii.analyzer import Analysis, AnalyzerConfig

    fast = Analysis(AnalyzerConfig(("en",), tuple(DEFAULT_ENTITIES), 0.4))
    assert fast.analyze("Nothing personal here, only words and no digits at all.") == ([], False)
    assert fast.entities_for("write to a@b.example.com", "en") == ["EMAIL_ADDRESS"]
    assert "PHONE_NUMBER" in fast.entities_for("call 0123", "en")
