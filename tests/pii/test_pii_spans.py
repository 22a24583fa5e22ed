"""Replacements agree with Presidio's AnonymizerEngine on adjacent, nested and overlapping spans."""

from __future__ import annotations

import random

import pytest

from curate.pii.spans import Span, final_spans, replace

anonymizer = pytest.importorskip("presidio_anonymizer")
from presidio_anonymizer.entities import OperatorConfig, RecognizerResult  # noqa: E402

ENGINE = anonymizer.AnonymizerEngine()
TYPES = ["EMAIL_ADDRESS", "PHONE_NUMBER", "IP_ADDRESS"]


def ours(text: str, spans: list[Span], action: str) -> str:
    def repl(span: Span, value: str) -> str:
        return f"<{span.entity}>" if action == "redact" else "*" * len(value)

    return replace(text, final_spans(text, spans), repl)


def theirs(text: str, spans: list[Span], action: str) -> str:
    results = [RecognizerResult(s.entity, s.start, s.end, s.score) for s in spans]
    op = (
        OperatorConfig("replace")
        if action == "redact"
        else OperatorConfig(
            "mask", {"masking_char": "*", "chars_to_mask": 10**9, "from_end": False}
        )
    )
    return ENGINE.anonymize(text, results, {t: op for t in TYPES}).text


CASES = {
    "adjacent": [Span(6, 10, "EMAIL_ADDRESS", 1.0), Span(10, 14, "PHONE_NUMBER", 0.4)],
    "adjacent same type": [Span(6, 10, "IP_ADDRESS", 0.6), Span(10, 14, "IP_ADDRESS", 0.6)],
    "spaced same type": [Span(2, 6, "IP_ADDRESS", 0.6), Span(8, 12, "IP_ADDRESS", 0.6)],
    "nested": [Span(4, 20, "EMAIL_ADDRESS", 1.0), Span(8, 12, "PHONE_NUMBER", 0.4)],
    "nested same start": [Span(4, 20, "EMAIL_ADDRESS", 0.5), Span(4, 12, "PHONE_NUMBER", 1.0)],
    "equal spans": [Span(4, 12, "PHONE_NUMBER", 0.4), Span(4, 12, "IP_ADDRESS", 0.6)],
    "overlapping": [Span(3, 12, "EMAIL_ADDRESS", 1.0), Span(9, 18, "PHONE_NUMBER", 0.4)],
    "overlapping same type": [Span(3, 12, "PHONE_NUMBER", 0.4), Span(9, 18, "PHONE_NUMBER", 0.7)],
    "chain": [
        Span(0, 5, "IP_ADDRESS", 0.6),
        Span(4, 9, "PHONE_NUMBER", 0.4),
        Span(8, 16, "EMAIL_ADDRESS", 1.0),
    ],
}
TEXT = "Grüße 😀 ñ 012345678 abcdefghij Ωmega\nend"


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("action", ["redact", "mask"])
def test_cases_match_the_anonymizer(name: str, action: str) -> None:
    spans = CASES[name]
    assert ours(TEXT, spans, action) == theirs(TEXT, spans, action)


def test_mask_keeps_length_and_hides_every_detected_character() -> None:
    for name, spans in CASES.items():
        out = ours(TEXT, spans, "mask")
        if name not in ("overlapping", "chain"):
            assert len(out) == len(TEXT), name
        for s in spans:
            assert TEXT[s.start : s.end] not in out


def test_random_span_sets_match_the_anonymizer() -> None:
    rng = random.Random(7)
    alphabet = "ab é😀Ω-.:@0123456789  \n"
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 40)))
        spans = []
        for _ in range(rng.randint(1, 6)):
            a = rng.randrange(len(text))
            b = rng.randint(a + 1, min(len(text), a + 12))
            spans.append(Span(a, b, rng.choice(TYPES), rng.choice([0.4, 0.6, 1.0])))
        for action in ("redact", "mask"):
            assert ours(text, spans, action) == theirs(text, spans, action), (text, spans)
