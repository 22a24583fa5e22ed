"""Idle workers helping a busy one through its documents (`curate.engines.help_desk`): real
forked processes at a real desk, and a real `curate run` whose last partition is costly."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus, run_verbose, shard_digests, write_jsonl

from curate.engines import help_desk, tasks
from curate.engines.help_desk import HelpDesk
from curate.errors import CurateError
from curate.stages import shared_work
from curate.stages.base import MapStage, StageResult

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="forked workers"
)
KEY = "doubler-key"


class Doubler(MapStage):  # type: ignore[type-arg]
    """Doubles numbers, slowly; says which process did (only a test may look at that)."""

    name = "doubler"

    def __init__(self, fail_in: int = 0) -> None:
        self.fail_in = fail_in  # the pid in which help_with raises

    def process(self, batch: Any) -> StageResult:
        raise NotImplementedError

    def help_with(self, item: int) -> tuple[int, int]:
        if os.getpid() == self.fail_in:
            raise ValueError(f"secret text {item}")
        time.sleep(0.005)
        return item * 2, os.getpid()


@pytest.fixture
def desk(monkeypatch: pytest.MonkeyPatch) -> Iterator[HelpDesk]:
    """A desk of two slots, this process in the first; as a worker, it shares through it."""
    desk = HelpDesk(2, multiprocessing.get_context("fork"))
    help_desk.join(desk)
    desk.open()
    try:
        yield desk
    finally:
        desk.close()
        help_desk.join(None)


def _helper(desk: HelpDesk, make: Callable[[], Doubler | None]) -> int:
    """Fork a helper that joins the desk (with the stage `make()` gives set up, or none) and
    serves until the desk closes; its exit code is 0 when it helped with something, 3 when
    it did not."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            stage = make()
            tasks._READY.clear()
            if stage is not None:
                tasks._READY[KEY] = stage
            help_desk.join(desk)
            code = 0 if help_desk.serve() else 3
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while not desk.waiting():  # the helper is at the desk
        assert time.monotonic() < deadline
        time.sleep(0.005)
    return pid


def _exit_code(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.fixture
def doubler(monkeypatch: pytest.MonkeyPatch) -> Doubler:
    stage = Doubler()
    monkeypatch.setattr(tasks, "_READY", {KEY: stage})
    monkeypatch.setattr(tasks, "ready_key", lambda _: KEY)
    monkeypatch.setattr(help_desk, "ready_key", lambda _: KEY)
    return stage


def test_a_waiting_helper_takes_a_share_and_results_come_back_in_order(
    desk: HelpDesk, doubler: Doubler
) -> None:
    pid = _helper(desk, lambda: doubler)
    got = shared_work.each(doubler, list(range(60)), doubler.help_with)
    desk.close()
    assert [value for value, _ in got] == [2 * i for i in range(60)]
    by = {who for _, who in got}
    assert by == {os.getpid(), pid}  # both worked
    assert _exit_code(pid) == 0


def test_without_a_desk_each_is_a_loop(doubler: Doubler) -> None:
    got = shared_work.each(doubler, [1, 2, 3], doubler.help_with)
    assert got == [(2, os.getpid()), (4, os.getpid()), (6, os.getpid())]


def test_a_helper_without_the_stage_claims_nothing(desk: HelpDesk, doubler: Doubler) -> None:
    pid = _helper(desk, lambda: None)
    got = shared_work.each(doubler, list(range(20)), doubler.help_with)
    desk.close()
    assert got == [(2 * i, os.getpid()) for i in range(20)]
    assert _exit_code(pid) == 3


def test_a_helper_that_fails_names_the_type_and_not_the_text(
    desk: HelpDesk, doubler: Doubler
) -> None:
    pid = _helper(desk, lambda: Doubler(fail_in=os.getpid()))
    with pytest.raises(CurateError, match=r"helping with documents failed \(ValueError\)") as e:
        shared_work.each(doubler, list(range(40)), doubler.help_with)
    assert "secret" not in str(e.value)
    desk.close()
    assert _exit_code(pid) == 3  # it helped with nothing


def test_a_poster_that_fails_still_lets_its_helpers_go(desk: HelpDesk, doubler: Doubler) -> None:
    pid = _helper(desk, lambda: doubler)

    done: list[int] = []

    def work(item: int) -> tuple[int, int]:  # only the poster calls it; its third item fails
        done.append(item)
        if len(done) == 3:
            raise RuntimeError("the poster's own failure")
        return doubler.help_with(item)

    with pytest.raises(RuntimeError, match="poster's own"):
        shared_work.each(doubler, list(range(60)), work)
    desk.close()
    assert _exit_code(pid) in (0, 3)  # went home, whatever it had claimed


def test_helpers_go_home_when_the_pass_ends(desk: HelpDesk, doubler: Doubler) -> None:
    pid = _helper(desk, lambda: doubler)
    started = time.monotonic()
    desk.close()
    assert _exit_code(pid) == 3
    assert time.monotonic() - started < 5
    assert not desk.waiting()


def test_no_more_helpers_are_taken_than_asked_for(doubler: Doubler) -> None:
    """Each helper taken gets a copy of the items left, so a job takes no more helpers than
    items: `recruit(most)` leaves the others waiting at the desk."""
    desk = HelpDesk(3, multiprocessing.get_context("fork"))
    help_desk.join(desk)
    desk.open()
    try:
        pids = [_helper(desk, lambda: doubler) for _ in range(2)]
        deadline = time.monotonic() + 30
        while desk.state[1] < 2:  # both at the desk
            assert time.monotonic() < deadline
            time.sleep(0.005)
        taken = desk.recruit(1)
        assert len(taken) == 1 and desk.state[1] == 1  # one still waits
        desk.next[desk.slot] = desk.ends[desk.slot] = 0  # an empty job: nothing to claim
        desk.inbox[taken[0]][1].send((desk.slot, KEY, [], 0))
        assert desk.collect(taken[0]) == {}
        desk.close()
        assert [_exit_code(pid) for pid in pids] == [3, 3]
    finally:
        desk.close()
        help_desk.join(None)


def test_every_slot_taken_leaves_a_worker_without_a_desk() -> None:
    desk = HelpDesk(1, multiprocessing.get_context("fork"))
    assert desk.join()
    try:
        help_desk.join(desk)  # the second process of a one-slot desk
        assert help_desk._DESK is None
    finally:
        help_desk.join(None)


def _helped_then_alone(
    tmp_path: Path,
    data: Path,
    stage: str,
    stages: list[dict[str, Any]] | None,
    **recipe_keys: Any,
) -> dict[int, Path]:
    """`curate -vv run` of `stages` (default: pii) on data/*.jsonl, each file one partition,
    with 2 workers, where a worker must have helped with `stage`, then with 1, where none
    can; each run's version folder."""
    versions = {}
    for workers in (2, 1):
        folder = tmp_path / f"w{workers}"
        stderr = run_verbose(folder, str(data / "*.jsonl"), "64MB", workers, stages,
                                 **recipe_keys)  # fmt: skip
        helped = [int(n) for n in re.findall(rf"helped {stage} with (\d+) items", stderr)]
        assert (sum(helped) > 0) == (workers == 2), stderr[-3000:]
        versions[workers] = folder / "out" / "t" / "v1"
    return versions


def test_a_late_costly_partition_is_shared_and_the_bytes_stay_one_workers(
    tmp_path: Path,
) -> None:
    """A real `curate run -vv` with 2 forked workers and the pii stage. The costly partition
    (the largest input, so it starts first) still has documents left when the other worker
    has done the rest: that worker helps with them, and the shards are a 1-worker run's."""
    pytest.importorskip("presidio_analyzer")
    data = tmp_path / "data"
    rows = [
        {"id": f"t{i}", "text": ",\n".join(
            f"[{(i * 37 + j) % 997 / 997:.6f}, {(i * 11 + j * 7) % 991 / 991:.6f}]"
            for j in range(60)
        )}
        for i in range(50)
    ]  # fmt: skip
    write_jsonl(data / "a-tables.jsonl", rows)
    for k in range(3):
        write_jsonl(data / f"b-{k}.jsonl", corpus(8, prefix=f"b{k}-"))
    versions = _helped_then_alone(tmp_path, data, "pii", None)  # each file one partition
    for version in versions.values():
        counters = json.loads((version / "manifest.json").read_text())["stages"][0]["counters"]
        assert counters["documents/analyzed"] + counters.get("documents/skipped", 0) == 74
    assert shard_digests(versions[2]) == shard_digests(versions[1])


def test_a_late_long_tokenize_partition_is_shared_and_the_bytes_stay_one_workers(
    tmp_path: Path,
) -> None:
    """The same with tokenize (Mistral's tekken file from the mistral-common wheel): the
    largest partition starts first and is still encoding when the other worker has done the
    small ones, which then encodes pieces of its batch; the ids are a 1-worker run's."""
    tekken = Path(pytest.importorskip("mistral_common").__file__).parent / "data"
    data = tmp_path / "data"
    write_jsonl(data / "a-long.jsonl", [
        {"id": f"l{i}", "text": f"Paragraph {i}. " + " ".join(
            f"word{(i * 31 + j) % 4999} and {j}," for j in range(2500)
        )}
        for i in range(120)
    ])  # fmt: skip
    for k in range(3):
        write_jsonl(data / f"b-{k}.jsonl", corpus(8, prefix=f"b{k}-"))
    stages = [{"tokenize": {"source": str(tekken / "tekken_240911.json"), "threads": 1}}]
    versions = _helped_then_alone(tmp_path, data, "tokenize", stages)
    for version in versions.values():
        assert json.loads((version / "manifest.json").read_text())["stages"][0]["docs_out"] == 144
    assert shard_digests(versions[2]) == shard_digests(versions[1])


def test_a_late_long_chat_partition_is_shared_and_the_bytes_stay_one_workers(
    tmp_path: Path,
) -> None:
    """The same with chat_template: runs of conversations, and each one's ids and mask (or
    why it is removed) computed by the helper, come back through the desk's pipes; the
    shards and the removals are a 1-worker run's."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chat"))
    from chat_fixtures import TEMPLATES, chat_tokenizer, conversations

    tokenizer = chat_tokenizer(tmp_path / "tok", TEMPLATES["mistral"], eos_token="</s>")
    data = tmp_path / "data"
    convs = conversations(5000, seed=3)  # about 5 MB; mistral's template refuses some
    write_jsonl(
        data / "a-long.jsonl", [{"id": f"l{i}", "messages": c} for i, c in enumerate(convs)]
    )
    for k in range(3):
        small = conversations(5, seed=k, system=False)
        write_jsonl(data / f"b-{k}.jsonl", [{"id": f"b{k}-{i}", "messages": c}
                                            for i, c in enumerate(small)])  # fmt: skip
    stages = [{"chat_template": {"source": str(tokenizer), "max_len": 400}}]
    versions = _helped_then_alone(tmp_path, data, "chat_template", stages,
                                  chat={"shape": "messages"}, on_error="fail")  # fmt: skip
    removed = {w: json.loads((v / "manifest.json").read_text())["stages"][0]["removed"]
               for w, v in versions.items()}  # fmt: skip
    assert shard_digests(versions[2]) == shard_digests(versions[1])
    assert removed[2] == removed[1] and len(removed[1]) >= 2, removed


def test_a_late_long_classifier_partition_is_shared_and_the_bytes_stay_one_workers(
    tmp_path: Path,
) -> None:
    """The same with a Hugging Face classifier (a one-layer BERT built here): its forward
    passes, one per group of documents batched by length, are computed by the helper too;
    the scores, and so the shards, are a 1-worker run's to the bit."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "classify"))
    from bert_model import build_model
    from labelled_docs import labelled_documents

    docs = labelled_documents()
    model = build_model(tmp_path / "bert", docs[:64], layers=1, steps=2, max_length=64, hidden=96)
    data = tmp_path / "data"
    texts = [t for _, t in docs]
    write_jsonl(data / "a-long.jsonl", [{"id": f"l{i}", "text": texts[i % len(texts)] + f" {i}"}
                                        for i in range(2400)])  # fmt: skip
    for k in range(3):
        write_jsonl(data / f"b-{k}.jsonl", corpus(8, prefix=f"b{k}-"))
    spec = {"model": str(model), "name": "edu", "batch_size": 16}
    stages = [{"classifier": {"models": [spec], "threads": 1}}]
    versions = _helped_then_alone(tmp_path, data, "classifier", stages)
    assert shard_digests(versions[2]) == shard_digests(versions[1])  # the scores included


def _serve_from_forkserver(desk: HelpDesk) -> None:
    """A forkserver-started helper: the desk came pickled with it, as to a pool's worker."""
    tasks._READY[KEY] = Doubler()
    help_desk.join(desk)
    sys.exit(0 if help_desk.serve() else 3)


def test_a_forkserver_started_worker_gets_the_desk_and_helps(doubler: Doubler) -> None:
    """A driver that runs threads starts its workers from a forkserver (`LocalEngine.start`):
    they get the desk's shared memory, lock and pipes as they start."""
    ctx = multiprocessing.get_context("forkserver")
    desk = HelpDesk(2, ctx)
    help_desk.join(desk)
    desk.open()
    try:
        helper = ctx.Process(target=_serve_from_forkserver, args=(desk,))
        helper.start()
        deadline = time.monotonic() + 60
        while not desk.waiting():
            assert time.monotonic() < deadline and helper.is_alive()
            time.sleep(0.01)
        got = shared_work.each(doubler, list(range(60)), doubler.help_with)
        desk.close()
        helper.join(30)
        assert helper.exitcode == 0
        assert [value for value, _ in got] == [2 * i for i in range(60)]
        assert helper.pid in {who for _, who in got}
    finally:
        desk.close()
        help_desk.join(None)
