"""The pii stage's phone memos pass between processes (`Analysis.learnt` / `learn`): what
one worker computed, another reuses instead of parsing again, with the same results."""

from __future__ import annotations

import pytest

pytest.importorskip("presidio_analyzer")

from curate.pii import phone
from curate.pii.analyzer import Analysis, AnalyzerConfig
from curate.stages.pii import DEFAULT_ENTITIES

TEXT = (
    "Call 415-555-0199 or +44 20 7946 0321 (office), fax (212) 555-0143. Release 2.2.27-1 "
    "of 2019-03-04, section 12.4.1, build 20190304.1, ticket #448812, port 8080:9090."
)


def _analysis() -> Analysis:
    return Analysis(AnalyzerConfig(("en",), tuple(DEFAULT_ENTITIES), 0.4))


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    extract = phone._SharedMatcher._extract_match

    def counting(self: phone._SharedMatcher, candidate: str, offset: int) -> object:
        seen.append(candidate)
        return extract(self, candidate, offset)

    monkeypatch.setattr(phone._SharedMatcher, "_extract_match", counting)
    return seen


def test_what_one_analyzer_learnt_another_reuses(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, control = _analysis(), _analysis(), _analysis()
    assert first.learnt() is None  # the warm-up is known to every process built alike
    parses = _parses(monkeypatch)
    found = first.analyze(TEXT)
    assert parses, "the text should make the phone recognizer parse"
    news = first.learnt()
    assert news is not None and first.learnt() is None  # told once
    assert second.learn(news) > 0
    parses.clear()
    assert second.analyze(TEXT) == found
    assert parses == []  # every verdict taken in, none computed again
    assert second.learnt() is None  # what it took in is the first's to tell
    assert control.analyze(TEXT) == found
    assert parses  # the control, not taught, parses
