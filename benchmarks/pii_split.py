"""Why the pii stage's partitions cost more with 2 workers than with 1: the two causes, apart.

`benchmarks.pii` finds that, on its docs corpus, the pii stage's own seconds summed over
the partitions grow by 5-8% with 2 workers (issue 25: that growth, with the set-up before
the fork, is what keeps 2 workers below 1.8x of one). Two things can make them grow, and
this measures each alone, in paired rounds on the same 2 MB partitions:

- **memos warmed twice**: the phone recognizer remembers verdicts per candidate
  (`curate.pii.phone`), and each worker fills its own memo from the partitions it runs.
  One fork of a process holding a set-up analyzer analyses every partition; then two forks
  of it, one after the other (never at once), each analyse every other partition, as the
  local engine's two workers take them. The CPU-seconds the two forks take together over
  the one's, and the verdicts each computed (phonenumbers' `_extract_match` and the
  no-region-parses test, counted by wrapping them) show what splitting the memo costs
  with no contention at all.
- **sharing the machine**: a `curate run` of the 1-worker recipe alone, then two of them
  at once (each with its own output and cache): the pii stage's own seconds (manifest) of
  the pair over the lone run's, each run holding one whole memo, show what two busy cores
  cost each other (caches, memory bandwidth, the hypervisor).

    python -m benchmarks.pii_split [--mb 50] [--rounds 3]

Needs benchmarks.pii's docs corpus (`python -m benchmarks.pii` builds it, or
`python -m benchmarks.corpus --size 100`). Writes benchmarks/results/pii_split.md.
"""

# ruff: noqa: E501  (report lines)
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.contenders import contender_env, precompile
from benchmarks.pii import WORK, build_corpus, load, pii_recipe

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PARTITION = 2_000_000  # bytes of text, as the 2MB partitions of benchmarks.pii hold


def partitions(corpus: Path) -> list[list[str]]:
    out: list[list[str]] = [[]]
    size = 0
    for doc in load(corpus):
        out[-1].append(doc["text"])
        size += len(doc["text"].encode())
        if size >= PARTITION:
            out.append([])
            size = 0
    return [p for p in out if p]


def memo_split(corpus: Path) -> dict[str, Any]:
    """One fork over every partition, then two forks over every other one (sequentially)."""
    import curate.pii.phone as phone
    from curate.pii.analyzer import Analysis, AnalyzerConfig
    from curate.stages.pii import DEFAULT_ENTITIES

    parts = partitions(corpus)
    analysis = Analysis(AnalyzerConfig(("en",), tuple(DEFAULT_ENTITIES), 0.4))
    computed = {"verdicts": 0, "silent": 0}
    extract = phone._SharedMatcher._extract_match
    nothing = phone._tries_when_nothing_parses

    def counted_extract(self: Any, *args: Any) -> Any:
        computed["verdicts"] += 1
        return extract(self, *args)

    def counted_nothing(*args: Any) -> Any:
        computed["silent"] += 1
        return nothing(*args)

    phone._SharedMatcher._extract_match = counted_extract  # type: ignore[method-assign]
    phone._tries_when_nothing_parses = counted_nothing

    def fork(indexes: range) -> dict[str, float]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read)
            t = time.process_time()
            for i in indexes:
                for text in parts[i]:
                    analysis.analyze(text)
            out = {"cpu_s": time.process_time() - t, **computed}
            os.write(write, json.dumps(out).encode())
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read) as f:
            return json.loads(f.read())  # type: ignore[no-any-return]

    n = len(parts)
    whole = fork(range(n))
    halves = [fork(range(0, n, 2)), fork(range(1, n, 2))]
    both = {k: sum(h[k] for h in halves) for k in whole}
    return {"partitions": n, "one": whole, "two": both}


def recipe(corpus: Path, folder: Path) -> Path:
    """benchmarks.pii's recipe with one worker, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(pii_recipe(corpus, folder, workers=1)))
    return path


def start(path: Path) -> subprocess.Popen[bytes]:
    folder = path.parent
    shutil.rmtree(folder / "out", ignore_errors=True)
    shutil.rmtree(folder / "cache", ignore_errors=True)
    env = dict(contender_env(), PYTHONPATH=str(HERE.parent), CURATE_CACHE=str(folder / "cache"))
    cli = Path(sys.executable).with_name("curate")
    return subprocess.Popen([str(cli), "run", "--quiet", str(path)], env=env,
                            stdout=subprocess.DEVNULL)  # fmt: skip


def stage_seconds(path: Path) -> float:
    manifest = next((path.parent / "out").glob("*/v1/manifest.json"))
    stages = json.loads(manifest.read_text())["stages"]
    return float(next(s for s in stages if s.get("name") == "pii")["seconds"])


def contention(corpus: Path) -> dict[str, float]:
    """pii stage seconds of a 1-worker run alone, then of two at once (their mean)."""
    a, b = recipe(corpus, WORK / "split-a"), recipe(corpus, WORK / "split-b")
    start(a).wait()
    alone = stage_seconds(a)
    pair = [start(a), start(b)]
    for p in pair:
        p.wait()
    together = statistics.mean([stage_seconds(a), stage_seconds(b)])
    return {"alone_s": alone, "together_s": together}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    precompile([HERE.parent / "curate"])
    corpus = build_corpus(args.mb)
    rounds = []
    for k in range(args.rounds):
        memo = memo_split(corpus)
        share = contention(corpus)
        rounds.append({"memo": memo, "share": share})
        print(f"round {k}: memo {memo['two']['cpu_s'] / memo['one']['cpu_s']:.3f}x, "
              f"sharing {share['together_s'] / share['alone_s']:.3f}x", flush=True)  # fmt: skip
    report(args, corpus, rounds)


def report(args: Any, corpus: Path, rounds: list[dict[str, Any]]) -> None:
    memo = [r["memo"]["two"]["cpu_s"] / r["memo"]["one"]["cpu_s"] for r in rounds]
    share = [r["share"]["together_s"] / r["share"]["alone_s"] for r in rounds]
    first = rounds[0]["memo"]
    one, two = first["one"], first["two"]
    lines = [
        "# Why 2 workers' pii partitions cost more than 1 worker's (generated by benchmarks/pii_split.py)",
        "",
        f"Corpus: {corpus.name} ({args.mb} MB), {first['partitions']} partitions of 2 MB. "
        f"{len(rounds)} rounds. Machine: {os.cpu_count()} cores, shared.",
        "",
        "| cause | measured as | ratio (median) | rounds |",
        "|---|---|---|---|",
        f"| memos warmed twice | two forks over alternate partitions, one after the other / one fork over all (CPU-s) | **{statistics.median(memo):.3f}x** | {', '.join(f'{x:.3f}' for x in memo)} |",
        f"| sharing the machine | pii stage s of two 1-worker runs at once / one alone | **{statistics.median(share):.3f}x** | {', '.join(f'{x:.3f}' for x in share)} |",
        "",
        f"Verdicts computed (deterministic): phone verdicts {one['verdicts']} with one memo, "
        f"{two['verdicts']} with two ({two['verdicts'] / max(1, one['verdicts']):.3f}x); "
        f"no-region-parses tests {one['silent']} / {two['silent']} "
        f"({two['silent'] / max(1, one['silent']):.3f}x).",
        "",
        f"Command: `python -m benchmarks.pii_split --mb {args.mb} --rounds {args.rounds}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pii_split.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
