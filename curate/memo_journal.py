"""The entries a process added to its memos since it last said, to hand to sibling workers.

A memo whose every value depends only on its key (the pii stage's phone verdicts) gives the
same results whichever process filled it, so workers running the same stage can pool what
each has computed: the local engine's forked workers each warmed their own, and with two
workers the docs corpus's pii partitions cost 1.067x the CPU of one worker's (issue 25,
`benchmarks/results/pii_split.md`). A journal reads what is new in each memo by insertion
order (dicts keep it), so asking costs a walk over the memo, not a copy of it, and takes in
what others learnt without overwriting anything known and without growing a memo past its
limit. What is new is read from the memo's end (dicts iterate backwards too), so telling
costs what was added, not the memo's size. Nothing here can change a result: an entry
taken in is one the process would have computed itself, equal to what it holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any

Memo = dict[Any, Any]
News = dict[Hashable, list[tuple[Any, Any]]]


class Journal:
    """What is new in a set of named memos. `memo(name)` returns the memo of that name (made
    empty if missing); `names()` the names it holds now. Entries stay below `limit` per memo."""

    def __init__(
        self, memo: Callable[[Hashable], Memo], names: Callable[[], list[Hashable]], limit: int
    ) -> None:
        self._memo = memo
        self._names = names
        self._limit = limit
        self._told: dict[Hashable, int] = {}  # per memo: entries told or taken in

    def news(self) -> News:
        """Entries added since the last call, by memo (none: an empty dict)."""
        out: News = {}
        for name in self._names():
            memo = self._memo(name)
            told = self._told.get(name, 0)
            if len(memo) < told:  # cleared at its limit since: all of it is new
                told = 0
            if len(memo) > told:  # the newest entries, walked from the end: O(new)
                newest = itertools.islice(reversed(memo.items()), len(memo) - told)
                out[name] = list(newest)[::-1]
            self._told[name] = len(memo)
        return out

    def take(self, news: News) -> int:
        """Add what another process told (`news`); returns the entries added. A memo with
        entries not yet told keeps its mark, so they are still told (with these, again)."""
        added = 0
        for name, items in news.items():
            memo = self._memo(name)
            current = len(memo) == self._told.get(name, 0)
            room = self._limit - len(memo)
            for key, value in items:
                if room <= 0:
                    break
                if key not in memo:
                    memo[key] = value
                    room -= 1
                    added += 1
            if current:
                self._told[name] = len(memo)
        return added
