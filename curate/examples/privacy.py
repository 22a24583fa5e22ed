"""What an example may show: nothing the recipe's `pii` stage would take out of the data.

A report travels further than the data, so every text an example keeps passes through
each `pii` stage it had not yet passed (those at or after the position where it was
taken: a document removed by the pii stage itself included), with the recipe's own
settings (entities, languages, threshold, allow list, spaCy model), every value found
replaced by its type tag whatever the stage's action (`Pii.shown`). Document ids never
pass a pii stage in a run, so the ids an example shows pass every one. Only the chosen
few documents are analysed, clipped to what is shown and a margin, so this costs a
fraction of a second per stage and reason.

Setting up Presidio for that costs seconds, most of a rerun that changed only a late
stage (the tokenizer), whose examples are the same texts as last time. So what each pii
stage showed for a list of texts is kept in the stage cache, keyed by the stage's
identity and the texts, and a stage is set up only when some list is not there.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Protocol, cast

from curate.cache import keys
from curate.cache.store import StageCache
from curate.stages.base import Stage
from curate.stages.examples import SHOWN

log = logging.getLogger(__name__)
SHOWN_FILE = "shown.json"


class Shows(Protocol):
    def shown(self, texts: list[str | None]) -> list[str | None]: ...


class Redactor:
    """The recipe's pii stages, applied to what examples keep."""

    def __init__(self, stages: Sequence[Stage], cache: StageCache | None = None) -> None:
        self.stages: list[tuple[int, Stage]] = [
            (s.context.position, s) for s in stages if s.name == "pii"
        ]
        self.cache = cache  # where what a stage showed is kept, None: nowhere

    def _shown(self, stage: Stage, texts: list[str | None]) -> list[str | None]:
        key = None
        if self.cache is not None:
            key = keys.chain("examples-shown", keys.stage_identity(stage), texts)
            found = self._cached(key, len(texts))
            if found is not None:
                return found
        from curate.engines.tasks import ready  # set up once per process, as a run's are

        shown = cast(Shows, ready(stage)).shown(texts)
        if key is not None:
            self._keep(key, shown)
        return shown

    def _cached(self, key: str, n: int) -> list[str | None] | None:
        assert self.cache is not None
        entry = self.cache.get(key)  # checked against its checksums, or None
        if entry is None or entry.file(SHOWN_FILE) is None:
            return None
        fd = self.cache.open_file(entry, SHOWN_FILE)
        with os.fdopen(fd, "rb") as f:
            data = json.loads(f.read())
        ok = isinstance(data, list) and len(data) == n
        if not ok or not all(t is None or isinstance(t, str) for t in data):
            return None  # not what this code keeps: shown again
        return cast(list[str | None], data)

    def _keep(self, key: str, shown: list[str | None]) -> None:
        assert self.cache is not None
        writer = self.cache.writer(key)
        try:
            with writer.open(SHOWN_FILE) as f:
                f.write(json.dumps(shown).encode())
            writer.commit({"kind": "examples-shown", "format": keys.ENTRY_FORMAT})
        except OSError as exc:  # a full disk or the like: shown again next time
            writer.abort()
            log.info("what the pii stage showed for examples was not kept: %s", exc)

    def texts(self, position: int, texts: list[str | None]) -> list[str | None]:
        """Texts taken at stage `position`, through the pii stages from there on, clipped to
        what an example shows."""
        if not texts:
            return []
        for at, stage in self.stages:
            if at >= position:
                texts = self._shown(stage, texts)
        return [t[:SHOWN] if t is not None else None for t in texts]

    def ids(self, ids: list[str | None]) -> list[str | None]:
        for _, stage in self.stages:
            ids = self._shown(stage, ids)
        return ids
