"""What an example may show: nothing the recipe's `pii` stage would take out of the data.

A report travels further than the data, so every text an example keeps passes through
each `pii` stage it had not yet passed (those at or after the position where it was
taken: a document removed by the pii stage itself included), with the recipe's own
settings (entities, languages, threshold, allow list, spaCy model), every value found
replaced by its type tag whatever the stage's action (`Pii.shown`). Document ids never
pass a pii stage in a run, so the ids an example shows pass every one. Only the chosen
few documents are analysed, clipped to what is shown and a margin, so this costs a
fraction of a second per stage and reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from curate.stages.base import Stage
from curate.stages.examples import SHOWN


class Shows(Protocol):
    def shown(self, texts: list[str | None]) -> list[str | None]: ...


class Redactor:
    """The recipe's pii stages, applied to what examples keep."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        from curate.engines.tasks import ready  # set up once per process, as a run's are

        self.stages: list[tuple[int, Shows]] = [
            (s.context.position, cast(Shows, ready(s))) for s in stages if s.name == "pii"
        ]

    def texts(self, position: int, texts: list[str | None]) -> list[str | None]:
        """Texts taken at stage `position`, through the pii stages from there on, clipped to
        what an example shows."""
        if not texts:
            return []
        for at, stage in self.stages:
            if at >= position:
                texts = stage.shown(texts)
        return [t[:SHOWN] if t is not None else None for t in texts]

    def ids(self, ids: list[str | None]) -> list[str | None]:
        for _, stage in self.stages:
            ids = stage.shown(ids)
        return ids
