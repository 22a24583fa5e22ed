"""The dataset's exclusions: which documents `curate forget` removed, kept without their text.

`<dataset>/.forget/exclusions.json`:

- `documents`: one `{hash, id}` per forgotten document: `hash` the xxh3-128 of its text as
  the reader reads it (`text_hash`), `id` its id when the recipe names an `id_field` (a
  derived id shifts when a line is inserted, so it is no key), else null.
- `reasons`: each request's reason, the documents it added and when.
- `quarantined`: the xxh3-128 of each forgotten quarantined record's line
  (`curate.forget.quarantined`): no document, but its line holds their data.
- `resolved`: per input name, the ids of excluded documents found in it (and the offsets of
  its forgotten quarantined lines), with the input's path, stat identity and content hash
  when read: valid while the stat identity is unchanged (`curate.forget.resolve`). An
  input read again because it changed keeps what was found in it before under `earlier`
  (the same fields), and one no longer among the inputs keeps its entry: a version built
  from the input as it was holds the documents under those ids, and `--where` and the
  purge find them there by the input's content hash in its manifest (size and mtime for
  states kept before states had one: `ids_of`), never by reading today's inputs.

The fingerprint covers `digest()`: the documents (and quarantined lines) only, so
re-resolving ids changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import xxhash

from curate.errors import CurateError
from curate.store import Store

Position = tuple[str, int]  # a quarantined line: input name, byte offset

FOLDER = ".forget"
NAME = "exclusions.json"
FORMAT = 1


def text_hash(text: str) -> str:
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


@dataclass
class Exclusions:
    documents: set[tuple[str, str | None]] = field(default_factory=set)
    reasons: list[dict[str, Any]] = field(default_factory=list)
    resolved: dict[str, dict[str, Any]] = field(default_factory=dict)
    quarantined: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, store: Store) -> Exclusions:
        text = store.read_own(FOLDER, NAME)
        if text is None:
            return cls()
        where = store.path / FOLDER / NAME
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}")
            documents = {(str(d["hash"]), d["id"] if d["id"] is None else str(d["id"]))
                         for d in data["documents"]}  # fmt: skip
            return cls(documents, list(data["reasons"]), dict(data.get("resolved") or {}),
                       {str(h) for h in data.get("quarantined") or ()})  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CurateError(
                f"{where}: not an exclusions file curate can read ({exc}); the documents it "
                "names would come back, so nothing is built until it is restored"
            ) from None

    def save(self, store: Store) -> None:
        data = {
            "format": FORMAT,
            "documents": [{"hash": h, "id": i} for h, i in sorted(self.documents, key=_order)],
            "reasons": self.reasons,
            "resolved": dict(sorted(self.resolved.items())),
        }
        if self.quarantined:
            data["quarantined"] = sorted(self.quarantined)
        store.save_own(FOLDER, NAME, json.dumps(data, indent=1, sort_keys=True) + "\n")

    def __bool__(self) -> bool:
        return bool(self.documents or self.quarantined)

    @property
    def hashes(self) -> frozenset[str]:
        return frozenset(h for h, _ in self.documents)

    @property
    def ids(self) -> frozenset[str]:
        """The explicit ids (a recipe's `id_field`), excluded wherever they appear."""
        return frozenset(i for _, i in self.documents if i is not None)

    def ids_of(
        self, inputs: list[dict[str, Any]]
    ) -> tuple[frozenset[str], frozenset[Position], list[str]]:
        """The ids (and quarantined lines) a version built from these inputs (its manifest's
        `inputs`) gives the forgotten documents: for each input, what was found in it when
        it had the content the version records (`_same_input`). And the inputs whose state
        then was not searched for every forgotten document (it changed, or went, before a request;
        `of` is the `digest()` a state was searched for): documents without an explicit id
        may be in the version under ids no one knows (every id found in that input is taken,
        a guess)."""
        ids, lines, unknown = set(self.ids), set[Position](), []
        digest, derived = self.digest(), any(i is None for _, i in self.documents)
        for item in inputs:
            name = item.get("name")
            if not isinstance(name, str):
                continue
            if name not in self.resolved:  # gone before any request read it
                unknown += [name] if derived else []
                continue
            states = _states(self.resolved[name])
            same = [s for s in states if _same_input(s, item)]
            if derived and (not same or same[0].get("of", digest) != digest):
                unknown.append(name)
            for state in same[:1] or states:
                ids.update(state.get("ids", ()))
                lines.update((name, int(o)) for o in state.get("quarantined", ()))
        return frozenset(ids), frozenset(lines), unknown

    def every_id(self) -> frozenset[str]:
        """Every id a forgotten document had in any input as it was ever read."""
        ids = set(self.ids)
        for entry in self.resolved.values():
            for state in _states(entry):
                ids.update(state.get("ids", ()))
        return frozenset(ids)

    def every_line(self) -> frozenset[Position]:
        return frozenset((name, int(o)) for name, entry in self.resolved.items()
                         for state in _states(entry)
                         for o in state.get("quarantined", ()))  # fmt: skip

    def digest(self) -> str:
        """What the fingerprint covers: the forgotten documents, not how they were found."""
        documents: Any = sorted(self.documents, key=_order)
        if self.quarantined:  # (without any, the digest of earlier exclusion files)
            documents = {"documents": documents, "quarantined": sorted(self.quarantined)}
        blob = json.dumps(documents, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def add(
        self, found: set[tuple[str, str | None]], reason: str, lines: AbstractSet[str] = frozenset()
    ) -> int:
        """Record a request (documents, and quarantined lines); the documents it adds."""
        new = found - self.documents
        new_lines = set(lines) - self.quarantined
        self.documents |= new
        self.quarantined |= new_lines
        request = {"reason": reason, "documents": len(new),
                   "at": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        if new_lines:
            request["quarantined"] = len(new_lines)
        self.reasons.append(request)
        return len(new)

    def record(self, dropped: int, unlisted: int = 0) -> dict[str, Any]:
        """What a version's manifest says (`forgotten`): the requests and what they removed
        (`unlisted`: quarantined records no quarantine file lists)."""
        out = {"documents": len(self.documents), "dropped": dropped, "reasons": self.reasons}
        if self.quarantined:
            out |= {"quarantined": len(self.quarantined), "unlisted": unlisted}
        return out


def _order(pair: tuple[str, str | None]) -> tuple[str, str]:
    return pair[0], pair[1] or ""


def _same_input(state: dict[str, Any], item: dict[str, Any]) -> bool:
    """Whether a version's input (its manifest's entry) is this state of it: by content hash
    where both have one (a file rewritten with its size and mtime kept is another state),
    else (a state kept before states had one) by size and mtime."""
    if state.get("content_hash") and item.get("content_hash"):
        return bool(state["content_hash"] == item["content_hash"])
    return state.get("size") == item.get("size") and state.get("mtime_ns") == item.get("mtime_ns")


def _states(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """An input's entry as last read, then what was found in it as it was before."""
    return [entry, *entry.get("earlier", ())]
