"""Matching a batch of URLs against block and allow lists and the word rules.

Domains are kept as sorted 64-bit hashes (xxh3 of the lowercase entry) with the list each
came from, so UT1's adult list (about 4.6 million domains) costs about 40 MB per worker
rather than a few hundred MB of Python strings, and a batch's hosts are looked up at once.
Two different domains share a hash with odds near 1 in 4 million over 2^64 per lookup:
negligible. URL substrings go into an Aho-Corasick automaton, each entry storing the lists
it is in, so each URL is scanned once whatever the number of entries.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from curate.urls.hosts import host_candidates, netloc
from curate.urls.lists import ListFile, read_entries, without_scheme
from curate.urls.words import RULES, WordRules

MISSING = "url_missing"


def _hash(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))


@dataclass
class DomainIndex:
    """Domain hashes, sorted, and for each the list (an index into the labels) it is in."""

    hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    lists: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    @classmethod
    def build(cls, entries: Sequence[tuple[int, list[str]]]) -> DomainIndex:
        if not entries:
            return cls()
        hashes = np.concatenate(
            [np.fromiter((_hash(e) for e in es), np.uint64, len(es)) for _, es in entries]
        )
        lists = np.concatenate([np.full(len(es), i, np.int32) for i, es in entries])
        order = np.lexsort((lists, hashes))
        return cls(hashes[order], lists[order])

    def lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in `hashes`, list) for every list each hash is in."""
        if not len(self.hashes) or not len(hashes):
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        order = np.argsort(hashes, kind="stable")  # sorted queries walk the table in order
        lo = np.empty(len(hashes), np.int64)
        hi = np.empty(len(hashes), np.int64)
        lo[order] = np.searchsorted(self.hashes, hashes[order], "left")
        hi[order] = np.searchsorted(self.hashes, hashes[order], "right")
        counts = hi - lo
        where = np.repeat(np.arange(len(hashes)), counts)
        starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
        return where, self.lists[np.arange(len(where)) + starts]


class SubstringIndex:
    """URL entries in an Aho-Corasick automaton; each entry stores the lists it is in."""

    def __init__(self, entries: Sequence[tuple[int, list[str]]]) -> None:
        owners: dict[str, list[int]] = {}
        for i, es in entries:
            for e in es:
                mine = owners.setdefault(e, [])
                if not mine or mine[-1] != i:
                    mine.append(i)
        self._automaton: Any = None
        if owners:
            import ahocorasick

            self._automaton = ahocorasick.Automaton()
            for entry, lists in owners.items():
                self._automaton.add_word(entry, tuple(lists))
            self._automaton.make_automaton()

    def lists(self, url: str) -> set[int]:
        if self._automaton is None:
            return set()
        return {i for _, lists in self._automaton.iter(url) for i in lists}


@dataclass
class Side:
    """The domain and substring indexes of the block lists, or of the allow lists."""

    labels: list[str]
    domains: DomainIndex
    substrings: SubstringIndex

    @classmethod
    def build(cls, files: list[ListFile]) -> Side:
        labels: list[str] = []
        domains: list[tuple[int, list[str]]] = []
        urls: list[tuple[int, list[str]]] = []
        for f in files:
            i = labels.index(f.label) if f.label in labels else len(labels)
            if i == len(labels):
                labels.append(f.label)
            (domains if f.kind == "domains" else urls).append((i, read_entries(f.path, f.kind)))
        return cls(labels, DomainIndex.build(domains), SubstringIndex(urls))


class UrlMatcher:
    """Every rule each URL of a batch fails, and whether an allow list names it.

    Rules, in the order a removed document's reason is chosen: `url_missing` (when the
    recipe drops documents without a URL), `url_domain:<list>` for each block list (and
    UT1 category) in recipe order, `url_substring:<list>` likewise, then the word rules.
    """

    def __init__(
        self, block: Side, allow: Side, words: WordRules, extract: Any, drop_missing: bool
    ) -> None:
        self.block, self.allow, self.words = block, allow, words
        self.extract = extract
        self.drop_missing = drop_missing
        self.rules = [MISSING] + [f"url_domain:{x}" for x in block.labels]
        self.rules += [f"url_substring:{x}" for x in block.labels] + list(RULES)
        self._word_rule = {r: self.rules.index(r) for r in RULES}
        # a crawl holds many pages per host: each host is split and hashed once per worker
        self._host_hashes = functools.lru_cache(maxsize=1 << 16)(self._hashes_of_host)

    def _hashes_of_host(self, host: str) -> tuple[int, ...]:
        return tuple(_hash(h) for h in host_candidates(self.extract, host))

    def judge(self, urls: list[str | None]) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
        """For each URL the rules (indexes into `self.rules`, ascending) it fails, whether an
        allow list names it, and whether it is missing (null or empty)."""
        n = len(urls)
        lowered = [u.lower() if u else "" for u in urls]
        missing = np.array([not u for u in lowered], dtype=bool)
        cands = [self._host_hashes(netloc(u)) if u else () for u in lowered]
        doc = np.repeat(np.arange(n), [len(c) for c in cands])
        flat = np.fromiter((h for c in cands for h in c), np.uint64, len(doc))
        allowed = np.zeros(n, dtype=bool)
        where, _ = self.allow.domains.lookup(flat)
        allowed[doc[where]] = True
        hits: list[set[int]] = [set() for _ in range(n)]
        where, lists = self.block.domains.lookup(flat)
        first_domain = 1
        for d, i in zip(doc[where].tolist(), lists.tolist(), strict=True):
            hits[d].add(first_domain + i)
        first_substring = first_domain + len(self.block.labels)
        for d in range(n):
            if missing[d]:
                if self.drop_missing:
                    hits[d].add(0)
                continue
            bare = without_scheme(lowered[d])
            if not allowed[d] and self.allow.substrings.lists(bare):
                allowed[d] = True
            hits[d].update(first_substring + i for i in self.block.substrings.lists(bare))
            hits[d].update(self._word_rule[r] for r in self.words.hits(lowered[d]))
        return [sorted(h) for h in hits], allowed, missing
