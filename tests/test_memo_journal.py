"""`curate.memo_journal`: what is new in a process's memos, and taking in another's."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from curate.memo_journal import Journal


class Memos:
    def __init__(self, limit: int = 100) -> None:
        self.memos: dict[Hashable, dict[Any, Any]] = {}
        self.journal = Journal(self.memo, lambda: list(self.memos), limit)

    def memo(self, name: Hashable) -> dict[Any, Any]:
        return self.memos.setdefault(name, {})


def test_news_are_the_entries_added_since_last_asked() -> None:
    m = Memos()
    m.memo("a").update({1: "x", 2: "y"})
    assert m.journal.news() == {"a": [(1, "x"), (2, "y")]}
    assert m.journal.news() == {}
    m.memo("a")[3] = "z"
    m.memo("b")["k"] = None
    assert m.journal.news() == {"a": [(3, "z")], "b": [("k", None)]}


def test_taken_in_entries_are_not_told_back_and_never_overwrite() -> None:
    one, two = Memos(), Memos()
    one.memo("a").update({1: "x", 2: "y"})
    two.memo("a")[2] = "mine"
    two.journal.news()
    assert two.journal.take(one.journal.news()) == 1
    assert two.memo("a") == {2: "mine", 1: "x"}
    assert two.journal.news() == {}  # what it took in is the other's to tell
    assert two.journal.take({"new": [(5, 6)]}) == 1  # a memo it lacked is made
    assert two.memo("new") == {5: 6}


def test_own_entries_not_yet_told_are_still_told_after_taking_in() -> None:
    one = Memos()
    one.memo("a")[1] = "own"
    one.journal.take({"a": [(2, "theirs")]})
    assert one.journal.news() == {"a": [(1, "own"), (2, "theirs")]}


def test_taking_in_stops_at_the_limit() -> None:
    m = Memos(limit=3)
    m.memo("a")[0] = 0
    assert m.journal.take({"a": [(i, i) for i in range(1, 10)]}) == 2
    assert len(m.memo("a")) == 3


def test_a_memo_cleared_at_its_limit_is_told_again_from_its_start() -> None:
    m = Memos()
    m.memo("a").update({1: 1, 2: 2, 3: 3})
    m.journal.news()
    m.memo("a").clear()
    m.memo("a")[9] = 9
    assert m.journal.news() == {"a": [(9, 9)]}
