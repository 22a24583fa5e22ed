"""What the host gives `n` copies of the same CPU-bound work run at once, right now.

The machine is shared, and what it gives two busy processes changes from minute to
minute in a way the foreign-load figure does not show: in one session the same 1-worker
pii run took 17.3-24.2 s with foreign load <= 0.02 and no steal in /proc/stat, and the
2-worker run's CPU seconds rose from 18 to 29. A round's n-worker/1-worker wall ratio
mixes curate's serial parts with that. This probe separates them: a process sets plain
Presidio up and analyses a slice of the corpus once (every lazy load done), then forks
copies that analyse the same slice again, one alone, then `n` at once (started together
through a barrier), then one alone again. `n * alone / together` is the speed-up of a job
with no serial part at all and nothing its processes wait for: on this host, at
that moment, the ceiling of a curate run's ratio on the same kind of work.

    python -m benchmarks.host_probe CORPUS.jsonl [--mb 0.5] [--copies 2]   (prints JSON)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.contenders import contender_env

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 600  # a copy analyses its slice in a few seconds


def probe(corpus: Path, mb: float = 0.5, copies: int = 2) -> dict[str, float]:
    """Run the probe in a fresh process (nothing of the harness's state in it)."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.host_probe", str(corpus), "--mb", str(mb),
         "--copies", str(copies)],
        check=True, capture_output=True, text=True, cwd=HERE.parent, env=contender_env(),
    )  # fmt: skip
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _slice(corpus: Path, mb: float) -> list[str]:
    texts, size = [], 0
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            if size >= mb * 1e6:
                break
            text = json.loads(line)["text"]
            texts.append(text)
            size += len(text.encode())
    return texts


def _engine() -> Any:
    from curate.pii.analyzer import Analysis, AnalyzerConfig
    from curate.stages.pii import DEFAULT_ENTITIES

    return Analysis(AnalyzerConfig(("en",), tuple(DEFAULT_ENTITIES), 0.4, fast=False)).engine


def _analyse(engine: Any, texts: list[str]) -> None:
    for text in texts:
        engine.analyze(text, language="en", score_threshold=0.4)


def _copy(engine: Any, texts: list[str], start: Any, times: Any) -> None:
    start.wait()
    t0 = time.perf_counter()
    _analyse(engine, texts)
    times.put((t0, time.perf_counter()))


def _timed(engine: Any, texts: list[str], copies: int) -> float:
    """Wall seconds from the first copy's start to the last copy's end."""
    ctx = multiprocessing.get_context("fork")  # the copies share the set-up engine
    start, times = ctx.Barrier(copies, timeout=TIMEOUT_S), ctx.Queue()
    procs = [ctx.Process(target=_copy, args=(engine, texts, start, times)) for _ in range(copies)]
    for p in procs:
        p.start()
    try:  # a copy that died never reports: fail, rather than wait for it for ever
        spans = [times.get(timeout=TIMEOUT_S) for _ in procs]
    except queue.Empty:
        for p in procs:
            p.kill()
        raise RuntimeError(f"a probe copy did not report within {TIMEOUT_S} s") from None
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"a probe copy exited {p.exitcode}")
    return max(e for _, e in spans) - min(s for s, _ in spans)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--mb", type=float, default=0.5)
    ap.add_argument("--copies", type=int, default=2)
    args = ap.parse_args()
    texts = _slice(args.corpus, args.mb)
    engine = _engine()
    _analyse(engine, texts)  # every lazy load (phone metadata, regexes) done before the fork
    before = _timed(engine, texts, 1)
    together = _timed(engine, texts, args.copies)
    after = _timed(engine, texts, 1)
    alone = statistics.mean([before, after])
    spread = abs(before - after) / alone
    speedup = args.copies * alone / together
    print(json.dumps({"mb": args.mb, "alone_s": alone, "alone_spread": spread,
                      "together_s": together, "speedup": speedup}))  # fmt: skip


if __name__ == "__main__":
    main()
