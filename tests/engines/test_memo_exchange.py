"""`curate.engines.memo_exchange`: forked workers pass what their stages learnt through one
anonymous log; a damaged or full log stops the sharing, never a task."""

from __future__ import annotations

import multiprocessing
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus, run_verbose, shard_digests, write_jsonl

from curate.engines import tasks
from curate.engines.memo_exchange import HEADER, MemoExchange
from curate.stages.base import MapStage, StageResult

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods() or not hasattr(os, "memfd_create"),
    reason="the exchange is for forked workers, its log in memory (memfd)",
)


class Learner(MapStage):  # type: ignore[type-arg]
    """A stage whose memo is a dict; `learnt` tells what was added since it last told."""

    name = "learner"

    def __init__(self) -> None:
        self.memo: dict[str, int] = {}
        self.told = 0

    def process(self, batch: Any) -> StageResult:
        raise NotImplementedError

    def learnt(self) -> Any:
        news = dict(list(self.memo.items())[self.told :])
        self.told = len(self.memo)
        return news or None

    def learn(self, learnt: Any) -> None:
        for k, v in learnt.items():
            self.memo.setdefault(k, v)
        self.told = len(self.memo)


@pytest.fixture
def learner(monkeypatch: pytest.MonkeyPatch) -> Learner:
    stage = Learner()
    monkeypatch.setattr(tasks, "_READY", {"learner-key": stage})
    return stage


@pytest.fixture
def exchange() -> Iterator[MemoExchange]:
    log = MemoExchange()
    try:
        yield log
    finally:
        log.close()


def _child(exchange: MemoExchange, learner: Learner, learn: dict[str, int]) -> None:
    """In a forked child: learn, tell, exit without running the parent's atexit hooks."""
    learner.memo.update(learn)
    exchange.tell()
    os._exit(0 if exchange.told == 1 and not exchange.stopped else 1)


def _fork(exchange: MemoExchange, learner: Learner, learn: dict[str, int]) -> None:
    pid = os.fork()
    if pid == 0:
        _child(exchange, learner, learn)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_worker_takes_in_what_the_others_told(learner: Learner, exchange: MemoExchange) -> None:
    _fork(exchange, learner, {"a": 1, "b": 2})
    _fork(exchange, learner, {"c": 3})
    learner.memo["mine"] = 0
    exchange.tell()  # its own frame: skipped when it reads
    exchange.take_in()
    assert learner.memo == {"mine": 0, "a": 1, "b": 2, "c": 3}
    assert exchange.taken == 2 and not exchange.stopped
    exchange.take_in()  # read to the end: nothing again
    assert exchange.taken == 2


def test_a_stage_set_up_after_news_arrived_takes_them_in(
    monkeypatch: pytest.MonkeyPatch, learner: Learner, exchange: MemoExchange
) -> None:
    """A worker started from a forkserver sets the pii stage up in its first partition,
    after reading the log for it: the next read starts again from the log's start."""
    _fork(exchange, learner, {"a": 1})  # another worker, which had the stage set up
    ready: dict[str, Learner] = {}  # this one, which has not yet
    monkeypatch.setattr(tasks, "_READY", ready)
    exchange.take_in()  # nothing set up here yet: the frame is for no stage of this process
    assert exchange.taken == 0
    ready["learner-key"] = late = Learner()  # set up in the partition that followed
    exchange.take_in()
    assert late.memo == {"a": 1} and exchange.taken == 1
    exchange.take_in()  # nothing set up since: read on from where it stopped
    assert exchange.taken == 1


def test_a_frame_being_written_is_read_next_time(learner: Learner, exchange: MemoExchange) -> None:
    _fork(exchange, learner, {"a": 1})
    whole = os.fstat(exchange.fd).st_size
    data = os.pread(exchange.fd, whole, 0)
    os.ftruncate(exchange.fd, whole - 3)  # as a reader may find it mid-write
    exchange.take_in()
    assert learner.memo == {} and not exchange.stopped
    os.pwrite(exchange.fd, data, 0)
    exchange.take_in()
    assert learner.memo == {"a": 1}


def test_a_damaged_frame_stops_the_sharing_not_the_worker(
    learner: Learner, exchange: MemoExchange
) -> None:
    _fork(exchange, learner, {"a": 1})
    os.pwrite(exchange.fd, b"\xff", HEADER.size + 2)  # a byte of the payload
    exchange.take_in()
    assert exchange.stopped and learner.memo == {}
    learner.memo["b"] = 2
    exchange.tell()  # stopped: nothing appended, nothing raised
    assert exchange.told == 0


def test_a_full_log_stops_the_sharing(learner: Learner) -> None:
    exchange = MemoExchange(limit=HEADER.size + 10)
    try:
        learner.memo.update({str(i): i for i in range(100)})
        exchange.tell()
        assert exchange.stopped and exchange.told == 0
        assert os.fstat(exchange.fd).st_size == 0
    finally:
        exchange.close()


def test_a_stage_failing_to_tell_stops_the_sharing_not_the_worker(
    monkeypatch: pytest.MonkeyPatch, exchange: MemoExchange
) -> None:
    class Broken(Learner):
        def learnt(self) -> Any:
            raise RuntimeError("a bug in a stage's memo")

    monkeypatch.setattr(tasks, "_READY", {"broken": Broken()})
    exchange.tell()
    assert exchange.stopped and exchange.told == 0


def test_the_log_has_no_name(exchange: MemoExchange) -> None:
    assert os.readlink(f"/proc/self/fd/{exchange.fd}").startswith("/memfd:curate-memos")


def test_stages_without_memos_tell_nothing(
    monkeypatch: pytest.MonkeyPatch, exchange: MemoExchange
) -> None:
    from curate.stages.normalize import Normalize

    monkeypatch.setattr(tasks, "_READY", {"n": Normalize(Normalize.Params())})
    exchange.tell()
    assert os.fstat(exchange.fd).st_size == 0


def test_without_memfd_nothing_is_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """The log holds what the memos hold (phone-like text): only ever in memory."""
    from curate.engines import memo_exchange
    from curate.engines.local import LocalEngine

    for has_memfd in (True, False):
        if not has_memfd:
            monkeypatch.delattr(os, "memfd_create")
        assert memo_exchange.available() is has_memfd
        engine = LocalEngine(2)  # forked, or from a forkserver when this process runs threads
        try:
            engine.start()
            assert (engine._exchange is not None) is has_memfd
        finally:
            engine.close()
        assert engine._exchange is None  # closed with the pool


def test_a_two_worker_run_shares_pii_memos_and_writes_one_workers_bytes(
    tmp_path: Path,
) -> None:
    """A real `curate run -vv` with 2 forked workers: a worker logs what it took in from the
    other, and the shards are those of a 1-worker run.

    13 partitions: with 5, a worker's first partition (the slowest: its first-use costs)
    could outlast the other worker's four, every take-in of which then came before any
    telling (6 runs in 26 logged none); with 13, each of 12 runs logged 10 take-ins."""
    pytest.importorskip("presidio_analyzer")
    docs = corpus(480)
    for i in range(0, len(docs), 3):
        docs[i]["text"] += (
            f" Call (415) 555-{i % 40:04d} or +44 20 7946 {i % 30:04d}, v2.{i % 9}.1."
        )
    write_jsonl(tmp_path / "data" / "a.jsonl", docs)
    digests = {}
    for workers in (2, 1):
        folder = tmp_path / f"w{workers}"
        stderr = run_verbose(folder, str(tmp_path / "data" / "a.jsonl"), "4KB", workers)
        took = re.findall(r"took in what pii learnt in process (\d+)", stderr)
        assert bool(took) == (workers == 2), stderr[-3000:]
        digests[workers] = shard_digests(folder / "out" / "t" / "v1")
    assert digests[2] == digests[1]
