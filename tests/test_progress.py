"""Progress that moves: documents and bytes within a running partition, a barrier's steps,
one final line per phase when stderr is no terminal, and updates rate-limited on both sides
(the workers' progress files and the renderer). Real runs on real files; the renderer that
records is a real one, collecting what the engine reports as `curate.progress.Detailed`."""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate.cli import main
from curate.engines.work_meter import metered
from curate.progress import StderrProgress, Work, no_progress


class Recorded:
    """Every report an engine makes, with the time it came (a Detailed renderer)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, int, int, Work | None]] = []
        self.lock = threading.Lock()

    def __call__(self, phase: str, done: int, total: int) -> None:
        with self.lock:
            self.events.append((time.monotonic(), phase, done, total, None))

    def work(self, phase: str, done: int, total: int, work: Work) -> None:
        with self.lock:
            self.events.append((time.monotonic(), phase, done, total, work))

    def of(self, phase: str) -> list[tuple[float, str, int, int, Work | None]]:
        return [e for e in self.events if e[1] == phase]


def long_partition(folder: Path, n: int = 600) -> Path:
    """One input, so one partition, read in many small batches each a stage sleeps on."""
    write_jsonl(folder / "data" / "long.jsonl", corpus(n, dup_every=0))
    return write_recipe(
        folder,
        batch_size="2KB",
        partition_size="1GB",
        stages=[{"custom_stages:Slow": {"seconds": 0.03}}, {"exact_dedup": {}}],
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_a_long_single_partition_reports_documents_and_bytes_before_it_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """workers=2 runs the partition in a pool process (two inputs: the pool starts), whose
    progress reaches the driver through its progress file."""
    monkeypatch.setenv("CURATE_PROGRESS_EVERY", "0.05")
    recipe = long_partition(tmp_path)
    if workers == 2:
        write_jsonl(tmp_path / "data" / "short.jsonl", corpus(3, prefix="s"))
    text = recipe.read_text().replace("workers: 1", f"workers: {workers}")
    recipe.write_text(text)
    seen = Recorded()
    version = curate.run(recipe, progress=seen)

    first = seen.of("pass 1")
    running = [w for _, _, done, total, w in first if w is not None and done < total]
    moving = sorted({w.docs for w in running if w.docs})
    assert len(moving) >= 3, moving  # several counts while the long partition still ran
    assert all(w.nbytes > 0 for w in running if w.docs)
    bytes_total = {w.bytes_total for w in running}
    inputs = sum(p.stat().st_size for p in (tmp_path / "data").iterdir())
    assert bytes_total == {inputs}  # plain JSONL: the input bytes, for the ETA
    counted = [w.nbytes for w in running]  # the same unit: bytes of the file read so far
    assert counted == sorted(counted) and max(counted) <= inputs, (counted, inputs)
    last = first[-1]
    assert last[2] == last[3] and last[4] is not None
    assert last[4].docs == version.manifest["counts"]["read"]  # the final report is whole

    second = seen.of("pass 2")  # after the barrier: documents staged for it are the total
    works = [w for *_, w in second if w is not None]
    assert works and works[-1].docs == works[-1].docs_total == version.manifest["counts"]["read"]
    assert not list(tmp_path.rglob("progress-*"))  # nothing of it left, nothing published


def test_a_barriers_decision_reports_its_steps(project: Path) -> None:
    recipe = write_recipe(
        project, stages=[{"exact_dedup": {}}, {"minhash_dedup": {"threshold": 0.5}}]
    )
    seen = Recorded()
    curate.run(recipe, progress=seen)
    exact = [(done, total, w.note) for _, _, done, total, w in seen.of("exact_dedup: deciding")
             if w is not None]  # fmt: skip
    assert [d for d, *_ in exact] == [0, 1, 2, 3] and {t for _, t, _ in exact} == {3}
    assert exact[0][2] == "ids of 60 summaries" and exact[-1][2] == "12 to drop"
    notes = [w.note for *_, w in seen.of("minhash_dedup: deciding") if w is not None]
    steps = [n.split(":")[0].split(" ")[0] for n in notes]
    assert steps == ["ids", "deciding", "banding", "verify", "clusters", "similarity",
                     "decision", *steps[7:]], notes  # fmt: skip
    assert re.fullmatch(r"banding: \d+ bands of 48 documents", notes[2]), notes


def test_stderr_that_is_no_terminal_gets_one_final_line_per_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CURATE_PROGRESS_EVERY", "0.05")
    recipe = long_partition(tmp_path, n=200)
    result = CliRunner().invoke(main, ["run", str(recipe)])
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "\r" not in result.stderr and "\033" not in result.stderr
    phases = [line.split(": ")[0] for line in lines]
    assert phases == ["pass 1", "exact_dedup", "pass 2"], lines
    assert re.match(
        r"pass 1: 1/1 · 200 docs \([\d,]+/s\) · [\d.]+ kB \([\d.]+ [kM]?B/s\) · ", lines[0]
    )
    assert lines[1].startswith("exact_dedup: deciding: 3/3 · 0 to drop · ")
    assert "ETA" not in result.stderr


def test_a_terminal_is_redrawn_at_most_every_interval(tmp_path: Path) -> None:
    stream = io.StringIO()
    progress = StderrProgress(stream, every=0.1, tty=True)
    started = time.monotonic()
    calls = 0
    while time.monotonic() - started < 0.55:
        calls += 1
        progress.work("pass 1", 0, 2, Work(docs=calls, nbytes=calls * 100, bytes_total=10**9))
    progress.work("pass 1", 1, 2, Work(docs=calls, nbytes=calls * 100))
    progress("pass 1", 2, 2)  # done: always drawn, with the last work it heard
    draws = stream.getvalue().split("\r\033[K")[1:]
    assert calls > 1000
    assert 3 <= len(draws) <= 9, len(draws)  # at most ~0.55 s / 0.1 s, and the final line
    assert draws[-1].startswith(f"pass 1: 2/2 · {calls:,} docs") and draws[-1].endswith("\n")
    assert "ETA" in draws[-3] and "ETA" not in draws[-1]
    progress("pass 1", 2, 2)  # a late poll after the phase ended draws nothing more
    assert len(stream.getvalue().split("\r\033[K")[1:]) == len(draws)


def test_a_first_pass_counts_the_bytes_of_the_file_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In Arrow, a batch takes more bytes than its JSON lines: counted against the file's
    size, a bar ran past its total (seen under load, when a frame came before the end)."""
    import pyarrow as pa

    monkeypatch.setenv("CURATE_PROGRESS_EVERY", "0")
    path = tmp_path / "part"
    lines = [b'{"text": "%d"}\n' % i for i in range(100)]
    starts = [100 + sum(map(len, lines[:i])) for i in range(100)]  # the range begins at 100
    stop = starts[-1] + len(lines[-1])
    chunks = [
        (pa.record_batch({"text": ["x" * 50] * 10, "_offset": starts[i : i + 10]}), i)
        for i in range(0, 100, 10)
    ]
    arrow = 0
    for batch, i in metered(iter(chunks), path, (100, stop)):
        if i:  # what the chunk before wrote: its rows, the bytes up to its last line start
            assert path.read_text().split() == [str(i), str(starts[i - 1] - 100)]
        arrow += batch.nbytes
    assert arrow > stop - 100  # what counting Arrow bytes would have said: past the end
    assert path.read_text().split() == ["100", str(stop - 100)]  # all of it, once done


def test_workers_rewrite_their_progress_file_at_most_every_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa

    monkeypatch.setenv("CURATE_PROGRESS_EVERY", "0.1")
    path = tmp_path / "part"
    batch = pa.record_batch({"text": ["abc"] * 10})
    values: list[str] = []
    started = time.monotonic()
    n = 0
    for _ in metered(((batch, i) for i in range(10**7)), path):
        n += 1
        if path.exists() and (not values or path.read_text() != values[-1]):
            values.append(path.read_text())  # a new write seen
        if time.monotonic() - started > 0.55:
            break
    assert n > 1000 and 3 <= len(values) <= 7, (n, values)  # at most one every 0.1 s
    docs = [int(v.split()[0]) for v in values]
    assert docs == sorted(docs) and docs[0] >= 10


def test_curate_run_is_silent_outside_a_notebook(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from curate.progress import auto, in_notebook

    assert not in_notebook() and auto() is no_progress
    curate.run(write_recipe(project))
    assert "pass 1" not in capsys.readouterr().err
