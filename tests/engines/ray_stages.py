"""Stages for the Ray engine's failure tests (tests/engines/test_ray_engine.py).

Ray workers import this module by its dotted path, so it lives beside the tests and the
test session puts this folder on the workers' PYTHONPATH.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pyarrow as pa

from curate.io.batches import ID
from curate.stages.base import MapStage, StageParams, StageResult


class TripwireParams(StageParams):
    target: str  # the id whose batch trips the wire
    kill: str  # while this file exists, its batch kills the worker process (file removed first)
    fail: str  # while this file exists, its batch raises
    log: str  # each batch seen appends its ids here


class Tripwire(MapStage):
    """Passes batches through unchanged; kills or fails on purpose when a marker file says so."""

    name = "tripwire"
    Params = TripwireParams

    def process(self, batch: pa.RecordBatch) -> StageResult:
        p: TripwireParams = self.params  # type: ignore[assignment]
        ids = batch.column(ID).to_pylist()
        if p.target in ids:
            if Path(p.kill).exists():
                os.unlink(p.kill)
                os.kill(os.getpid(), signal.SIGKILL)
            if Path(p.fail).exists():
                raise RuntimeError("interrupted on purpose")
        with open(p.log, "a", encoding="utf-8") as f:
            f.write("".join(f"{i}\n" for i in ids))
        return StageResult(batch)


class PauseParams(StageParams):
    seconds: float


class Pause(MapStage):
    """Sleeps on every batch, so that a partition runs long enough to watch its progress."""

    name = "pause"
    Params = PauseParams

    def process(self, batch: pa.RecordBatch) -> StageResult:
        import time

        time.sleep(self.params.seconds)  # type: ignore[attr-defined]
        return StageResult(batch)


class RecallParams(StageParams):
    log: str  # each worker appends here how many ids it took in from other workers


class Recall(MapStage):
    """Remembers the ids it has seen (a memo whose values depend on the key alone), tells
    them to sibling workers (`Stage.learnt`) and logs what it takes in (`Stage.learn`)."""

    name = "recall"
    Params = RecallParams

    def setup(self) -> None:
        self._seen: dict[str, bool] = {}
        self._told = 0

    def process(self, batch: pa.RecordBatch) -> StageResult:
        for i in batch.column(ID).to_pylist():
            self._seen.setdefault(i, True)
        return StageResult(batch)

    def learnt(self) -> object:
        news = list(self._seen)[self._told :]
        self._told = len(self._seen)
        return news or None

    def learn(self, learnt: object) -> None:
        assert isinstance(learnt, list)
        new = [i for i in learnt if i not in self._seen]
        for i in new:
            self._seen[i] = True
        self._told = len(self._seen)
        with open(self.params.log, "a", encoding="utf-8") as f:  # type: ignore[attr-defined]
            f.write(f"{os.getpid()} {len(new)}\n")
