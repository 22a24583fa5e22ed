"""PII benchmark: the curate `pii` stage against plain Presidio, each process starting cold.

Contenders, on the same documents, each round in fresh processes (nothing imported,
built or remembered before; nothing persisted between rounds: the run's output and stage
cache are deleted), CPU seconds of the whole process tree:

- **plain Presidio**: `AnalyzerEngine.analyze` + `AnonymizerEngine.anonymize` per
  document, one process, with the same recognizers and settings as the stage's defaults
  (no-op NLP engine; e-mail, phone, card, IBAN, IP, US SSN, crypto; score >= 0.4;
  each value replaced by `<TYPE>`), its imports and setup included.
- **curate run, 2 workers** and **curate run, 1 worker**: `curate run` of a recipe holding
  only the `pii` stage with its defaults (after a no-op normalize), local engine.

Cold means no memo, cache or output carried over; Python's bytecode is not such a thing: the
tree's curate is compiled once before the rounds and read by every run, as an installed
curate's is (sessions here export PYTHONDONTWRITEBYTECODE=1, under which each run compiled
curate's modules again: about 0.25 CPU-s of the driver's, before the fork).

Rounds are paired (all contenders in each round, order rotating); medians are reported,
with the foreign load of each round: CPU time the rest of the machine used meanwhile
(from /proc/stat), in cores. Between a round's two curate runs `benchmarks.host_probe`
measures what the host gives two processes at that moment (a load the foreign-load figure
does not show): the ceiling each round's 2-worker/1-worker ratio is read against.

Two corpora: `docs`, the first MB of benchmarks.corpus's 100 MB corpus (man pages,
/usr/share/doc files, Python's standard library: the corpus the stage was tuned on), and `site`, files of this Python environment's site-packages
(third-party sources, their READMEs, licences and metadata), which it was not tuned on.
The output of every curate run must equal plain Presidio's text for every document (the
benchmark exits non-zero otherwise). Where the time goes: each recognizer's CPU seconds,
plain and as curate runs them, and the setup of one process.

    python -m benchmarks.pii --mb 50 [--corpus docs --corpus site] [--rounds 5] [--partition-size 8MB]
        [--plain-rounds N]   (plain Presidio in the first N rounds only: ~4 min a round saved)
        [--probe-mb 0.5]     (the host probe's slice of the corpus; 0: no probe)

Writes benchmarks/results/pii.md and pii.json (pii-<mb>.md/json for other sizes, with
-partition-<size> for another --partition-size).
"""

# ruff: noqa: E501  (report lines)
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks import host_probe
from benchmarks.contenders import contender_env, precompile
from benchmarks.measure import machine_busy

HERE = Path(__file__).resolve().parent
WORK = HERE / "work" / "pii"
RESULTS = HERE / "results"
SOURCE = HERE / "work" / "corpus-100"
SITE = Path(
    sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages"
)
SITE_SUFFIXES = {".py", ".md", ".rst", ".txt", ".cfg", ".toml", ".pyi"}
SITE_NAMES = {"METADATA", "LICENSE", "LICENCE", "AUTHORS", "COPYING", "NOTICE", "README"}
MAX_DOC_BYTES = 10**6


def children_cpu() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def build_corpus(mb: int) -> Path:
    """The first `mb` MB of documents of benchmarks.corpus's 100 MB corpus (a stable mix)."""
    path = WORK / f"corpus-{mb}.jsonl"
    if path.exists():
        return path
    parts = sorted(SOURCE.glob("part-*.jsonl"))
    if not parts:
        sys.exit("no corpus: run `python -m benchmarks.corpus --size 100` first")
    budget = mb * 10**6
    WORK.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for part in parts:
            with open(part, encoding="utf-8") as f:
                for line in f:
                    if budget <= 0:
                        break
                    out.write(line)
                    budget -= len(json.loads(line)["text"].encode())
    return path


def build_site_corpus(mb: int) -> Path:
    """`mb` MB of text files of this environment's site-packages, in path order: a corpus
    of another kind (third-party code, READMEs, licences, package metadata with authors'
    addresses) that the stage was not tuned on."""
    path = WORK / f"site-{mb}.jsonl"
    if path.exists():
        return path
    budget = mb * 10**6
    WORK.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for root, dirs, files in os.walk(SITE):
            dirs.sort()
            for name in sorted(files):
                file = Path(root, name)
                if file.suffix not in SITE_SUFFIXES and file.stem not in SITE_NAMES:
                    continue
                try:
                    data = file.read_bytes()
                except OSError:
                    continue
                if not data or len(data) > MAX_DOC_BYTES or b"\0" in data:
                    continue
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                doc = {"id": str(file.relative_to(SITE)), "text": text}
                out.write(json.dumps(doc, ensure_ascii=False) + "\n")
                budget -= len(data)
                if budget <= 0:
                    break
            if budget <= 0:
                break
    tmp.rename(path)
    return path


def load(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def plain_presidio(docs: list[dict[str, str]], defaults: bool = False) -> dict[str, str]:
    """Presidio as its documentation shows it, with the stage's recognizers and settings."""
    from presidio_anonymizer import AnonymizerEngine
    from presidio_anonymizer.entities import OperatorConfig

    from curate.pii.analyzer import Analysis, AnalyzerConfig
    from curate.stages.pii import DEFAULT_ENTITIES

    ents = tuple(DEFAULT_ENTITIES)
    engine = Analysis(AnalyzerConfig(("en",), ents, 0.4, fast=False)).engine
    anonymizer = AnonymizerEngine()
    ops = {e: OperatorConfig("replace") for e in ents}
    out = {}
    for d in docs:
        if defaults:
            found = engine.analyze(d["text"], language="en")
        else:
            found = engine.analyze(
                d["text"], language="en", entities=list(ents), score_threshold=0.4
            )
        out[d["id"]] = anonymizer.anonymize(d["text"], found, ops).text
    return out


def plain_presidio_cold(corpus: Path, out: Path) -> tuple[float, float]:
    """Plain Presidio in a fresh process (Presidio imported the way its users import it,
    `import presidio_analyzer` first); its texts written to `out`."""
    c0, t0 = children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "benchmarks.pii", "--plain-worker", str(corpus), str(out)],
                   check=True, cwd=HERE.parent)  # fmt: skip
    return time.perf_counter() - t0, children_cpu() - c0


def _plain_worker(corpus: Path, out: Path) -> None:
    import presidio_analyzer  # noqa: F401  (as a user's script imports it: transformers and torch too, when installed)

    texts = plain_presidio(load(corpus))
    out.write_text(json.dumps(texts, ensure_ascii=False))


def pii_recipe(
    corpus: Path, folder: Path, workers: int, partition_size: str = "2MB"
) -> dict[str, Any]:
    """The benchmark's recipe: a no-op normalize, then the `pii` stage with its defaults,
    output in `folder`."""
    recipe = {
        "name": "pii-bench",
        "inputs": [str(corpus)],
        "id_field": "id",
        "stages": [{"normalize": {"form": None, "newlines": False, "remove_control": False,
                                  "max_newlines": 0, "strip": False}}, {"pii": {}}],
        # 2 MB: 25 partitions of a 50 MB file, so 2 workers end within ~1/25 of each other
        # (the default 8 MB makes 7: one worker does 4, a 1.75x ceiling on 2 workers' speed-up;
        # the site corpus's costly stretches make it worse). --partition-size default: none set
        "partition_size": partition_size,
        "output": {"root": str(folder / "out"), "fsync": False, "rejected": True},
        "engine": {"workers": workers},
    }  # fmt: skip
    if partition_size == "default":
        del recipe["partition_size"]
    return recipe


def curate_run(
    corpus: Path, workers: int, partition_size: str = "2MB"
) -> tuple[dict[str, str], float, float, dict[str, Any]]:
    import yaml

    folder = WORK / f"run-{workers}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    recipe = pii_recipe(corpus, folder, workers, partition_size)
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    curate_cli = Path(sys.executable).with_name("curate")
    # the code beside this benchmark; a stage cache of its own, deleted after the round
    env = dict(contender_env(), PYTHONPATH=str(HERE.parent), CURATE_CACHE=str(folder / "cache"))
    c0, t0 = children_cpu(), time.perf_counter()
    subprocess.run([str(curate_cli), "run", "--quiet", str(folder / "recipe.yaml")], check=True,
                   stdout=subprocess.DEVNULL, env=env)  # fmt: skip
    wall, cpu_s = time.perf_counter() - t0, children_cpu() - c0
    version = folder / "out" / "pii-bench" / "v1"
    texts: dict[str, str] = {}
    for shard in sorted((version / "shards").glob("*.arrow")):
        table = pa.ipc.open_stream(pa.memory_map(str(shard))).read_all()
        texts.update(
            zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True)
        )
    manifest = json.loads((version / "manifest.json").read_text())
    shutil.rmtree(folder, ignore_errors=True)
    return texts, wall, cpu_s, manifest


def recognizer_seconds(docs: list[dict[str, str]]) -> list[tuple[str, float, float]]:
    """Seconds per recognizer over docs: Presidio's own, and patched as curate runs them
    (caches cold: a fresh analyzer)."""
    from curate.pii.analyzer import Analysis, AnalyzerConfig
    from curate.stages.pii import DEFAULT_ENTITIES

    ents = tuple(DEFAULT_ENTITIES)
    rows = []
    plain = Analysis(AnalyzerConfig(("en",), ents, 0.4, fast=False)).engine
    fast = Analysis(AnalyzerConfig(("en",), ents, 0.4)).engine
    nlp = plain.nlp_engine.process_text("", "en")
    for rp, rf in zip(
        sorted(plain.registry.recognizers, key=lambda r: r.name),
        sorted(fast.registry.recognizers, key=lambda r: r.name),
        strict=True,
    ):
        if not set(rp.supported_entities) & set(ents):
            continue
        times = []
        for rec in (rp, rf):
            t = time.process_time()
            for d in docs:
                rec.analyze(d["text"], rec.supported_entities, nlp)
            times.append(time.process_time() - t)
        rows.append((rp.name, times[0], times[1]))
    return rows


SETUP_PROBE = """
import resource, time, json
from curate.stages.base import StageContext
from curate.stages.pii import Pii, PiiParams
t = time.perf_counter()
Pii(PiiParams(), StageContext()).setup()
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"setup_wall": time.perf_counter() - t, "process_cpu": r.ru_utime + r.ru_stime}))
"""


def setup_cost() -> dict[str, float]:
    """CPU seconds of a fresh process that only sets the stage up (Python, curate, Presidio)."""
    proc = subprocess.run([sys.executable, "-c", SETUP_PROBE], check=True, capture_output=True,
                          text=True, cwd=HERE.parent, env=contender_env())  # fmt: skip
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def wall_parts(wall: float, manifest: dict[str, Any]) -> dict[str, float]:
    """Where a run's wall time went, from the manifest's timings: before the first pass
    (planning; with 2+ workers also the pii setup before the fork), the passes (with 1
    worker the pii setup is in the first), examples, the rest of publishing, and outside
    `Build._run` (interpreter start, CLI imports, recipe and fingerprint; exit); and the
    pii stage's own seconds summed over the partitions (setup excluded), whose growth with
    2 workers is what the workers lose to running at once."""
    t = manifest.get("timings", {})
    stage = manifest.get("stages", [{}])[-1].get("seconds", 0.0)
    total, setup, engine = t.get("total", 0.0), t.get("setup", 0.0), t.get("engine", 0.0)
    examples = t.get("examples", 0.0)
    return {"before_pass_s": setup, "passes_s": engine, "examples_s": examples,
            "publish_s": total - setup - engine - examples, "outside_s": wall - total,
            "stage_s": stage}  # fmt: skip


def one_round(
    corpus: Path,
    k: int,
    workers: int,
    partition_size: str = "2MB",
    reference: dict[str, str] | None = None,
    probe_mb: float = 0.0,
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """All contenders once, in an order that rotates with the round; outputs compared. With
    `reference` (plain Presidio's texts from an earlier round) plain Presidio is not run:
    its output and cost do not change between rounds, the curate runs' wall ratio does.
    With `probe_mb`, `benchmarks.host_probe` runs between the two curate runs: what the host
    gave `workers` copies of plain Presidio's work at once then, the ceiling of their ratio."""
    names = ["plain", f"run{workers}", "run1"] if reference is None else [f"run{workers}", "run1"]
    order = names[k % len(names) :] + names[: k % len(names)]
    if probe_mb:  # right after the first curate run: as close to both as it can be
        first = min(order.index(f"run{workers}"), order.index("run1"))
        order.insert(first + 1, "probe")
    out: dict[str, dict[str, float]] = {}
    texts: dict[str, dict[str, str]] = {}
    manifest: dict[str, Any] = {}
    for name in order:
        if name == "probe":
            out[name] = host_probe.probe(corpus, probe_mb, workers)
            print(json.dumps({"round": k, "contender": name, **out[name]}), flush=True)
            continue
        busy0 = machine_busy()
        if name == "plain":
            target = WORK / "plain.json"
            wall, cpu_s = plain_presidio_cold(corpus, target)
            texts[name] = json.loads(target.read_text())
            target.unlink()
        else:
            texts[name], wall, cpu_s, manifest = curate_run(corpus, int(name[3:]), partition_size)
        foreign = (machine_busy() - busy0 - cpu_s) / wall
        out[name] = {"wall_s": wall, "cpu_s": cpu_s, "foreign_load": max(0.0, foreign)}
        if name != "plain":
            out[name].update(wall_parts(wall, manifest))
        print(json.dumps({"round": k, "contender": name, **out[name]}), flush=True)
    plain = texts["plain"] if reference is None else reference
    differ = sorted(
        {i for n in names if n != "plain" for i in plain if texts[n].get(i) != plain[i]}
    )
    original = {d["id"]: d["text"] for d in load(corpus)}
    return out, {"differ": differ, "manifest": manifest, "plain": plain,
                 "changed": sum(1 for i, t in plain.items() if t != original[i])}  # fmt: skip


def measure(
    corpus: Path,
    rounds: int,
    workers: int,
    partition_size: str,
    plain_rounds: int | None = None,
    probe_mb: float = 0.0,
) -> dict[str, Any]:
    docs = load(corpus)
    size = sum(len(d["text"].encode()) for d in docs) / 1e6
    per: dict[str, list[dict[str, float]]] = {}
    differ: set[str] = set()
    info: dict[str, Any] = {}
    reference: dict[str, str] | None = None
    for k in range(rounds):
        plain_too = plain_rounds is None or k < max(1, plain_rounds)
        got, info = one_round(
            corpus, k, workers, partition_size, None if plain_too else reference, probe_mb
        )
        reference = info.pop("plain")
        differ |= set(info["differ"])
        for name, row in got.items():
            per.setdefault(name, []).append(row)
    med = {
        name: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        for name, rows in per.items()
    }
    return {"corpus": corpus.name, "docs": len(docs), "mb": size, "rounds": per, "median": med,
            "plain_rounds": len(per["plain"]),
            "differ": sorted(differ), "manifest": info.get("manifest", {}),
            "changed_docs": info.get("changed", 0)}  # fmt: skip


def paired_ratio(rounds: dict[str, list[dict[str, float]]], workers: int) -> float:
    """The median over rounds of 1 worker's wall / `workers`' wall in the same round: both
    runs of a round see the same state of a shared machine, which drifts between rounds by
    more than the figure's margin (the same 1-worker run took 17.9-23.6 s in one session)."""
    return statistics.median(
        one["wall_s"] / many["wall_s"]
        for one, many in zip(rounds["run1"], rounds[f"run{workers}"], strict=True)
    )


def probe_lines(results: list[dict[str, Any]], w: int) -> list[str]:
    """Each round's curate ratio beside what the host probe measured in that round."""
    if not all("probe" in r["rounds"] for r in results):
        return []
    lines = [
        f"Each round, `benchmarks.host_probe` ran between the two curate runs: plain Presidio's "
        f"analysis of the corpus's first {results[0]['rounds']['probe'][0].get('mb', 0.5)} MB, "
        f"set up and warmed once, timed in one process alone and in {w} forked copies at once: "
        f"the speed-up the host gave {w} processes with no serial part and nothing to wait for, "
        "right then (the ceiling of the curate runs' ratio; foreign load does not show it). "
        "The last column is the curate ratio as a share of that ceiling.",
        "",
        f"| corpus | round | 1 worker wall s | {w} workers wall s | ratio | host probe: alone s | "
        f"{w} at once s | host speed-up | ratio / host |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rounds = r["rounds"]
        for k, (one, many, pr) in enumerate(
            zip(rounds["run1"], rounds[f"run{w}"], rounds["probe"], strict=True)
        ):
            ratio = one["wall_s"] / many["wall_s"]
            lines.append(
                f"| {r['corpus']} | {k} | {one['wall_s']:.2f} | {many['wall_s']:.2f} | {ratio:.2f}x "
                f"| {pr['alone_s']:.2f} | {pr['together_s']:.2f} | {pr['speedup']:.2f}x "
                f"| {ratio / pr['speedup']:.0%} |"
            )
    lines.append("")
    for r in results:
        rounds = r["rounds"]
        host = [p["speedup"] for p in rounds["probe"]]
        share = [
            one["wall_s"] / many["wall_s"] / p["speedup"]
            for one, many, p in zip(rounds["run1"], rounds[f"run{w}"], rounds["probe"], strict=True)
        ]
        lines.append(
            f"- {r['corpus']}: the host gave {w} processes {statistics.median(host):.2f}x "
            f"(median; {min(host):.2f}-{max(host):.2f}x over the rounds); the curate runs' "
            f"ratio was {statistics.median(share):.0%} of the round's ceiling (median)."
        )
    return [*lines, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--corpus", action="append", choices=["docs", "site"])
    ap.add_argument("--partition-size", default="2MB", help="the recipe's; 'default': none set")
    ap.add_argument("--plain-rounds", type=int, default=None,
                    help="run plain Presidio (~4 min per 50 MB) in the first N rounds only; "
                    "the curate runs in every round, checked against its output")  # fmt: skip
    ap.add_argument("--probe-mb", type=float, default=0.5,
                    help="the host probe's slice of the corpus, each round (0: no probe)")  # fmt: skip
    ap.add_argument("--profile-mb", type=float, default=2)  # plain Presidio: ~8 CPU s per MB
    ap.add_argument("--plain-worker", nargs=2, metavar=("CORPUS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plain_worker:
        _plain_worker(Path(args.plain_worker[0]), Path(args.plain_worker[1]))
        return
    precompile([HERE.parent / "curate"])  # read as bytecode, as an install's is
    kinds = args.corpus or ["docs", "site"]
    results = []
    for kind in kinds:
        corpus = build_corpus(args.mb) if kind == "docs" else build_site_corpus(args.mb)
        got = measure(corpus, args.rounds, args.workers, args.partition_size, args.plain_rounds,
                      args.probe_mb)  # fmt: skip
        results.append(got)
    docs = load(build_corpus(args.mb))
    profile = recognizer_seconds([d for d, _ in _prefix(docs, args.profile_mb)])
    setup = setup_cost()
    report(args, results, profile, setup)
    bad = [r["corpus"] for r in results if r["differ"]]
    if bad:
        sys.exit(f"documents differ between curate and plain Presidio in {', '.join(bad)}")


def _prefix(docs: list[dict[str, str]], mb: float) -> Any:
    acc = 0.0
    for d in docs:
        if acc >= mb * 1e6:
            return
        acc += len(d["text"].encode())
        yield d, acc


def report(args: Any, results: list[dict[str, Any]], profile: list[tuple[str, float, float]],
           setup: dict[str, float]) -> None:  # fmt: skip
    w = args.workers
    lines = [
        "# PII: curate `pii` stage vs plain Presidio, cold",
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}. Medians of "
        f"{args.rounds} paired rounds; every process starts cold (imports, setup and the phone "
        "verdicts' memo included; nothing kept between rounds; curate's bytecode compiled "
        "beforehand, as an install has it). CPU = CPU seconds of the "
        "whole process tree; foreign load = cores the rest of the machine kept busy meanwhile."
        + (
            ""
            if args.plain_rounds is None
            else f" Plain Presidio ran in the first "
            f"{max(1, args.plain_rounds)} rounds only (--plain-rounds); every curate run's "
            "output was compared with its output."
        ),
        "",
        "| corpus | docs | MB | contender | wall s | CPU s | MB per CPU-s | CPU vs plain | wall vs plain | foreign load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    labels = {"plain": "plain Presidio (same recognizers), 1 process", f"run{w}": f"curate run, {w} workers",
              "run1": "curate run, 1 worker"}  # fmt: skip
    summary = []
    for r in results:
        med = r["median"]
        plain = med["plain"]
        for name in ("plain", f"run{w}", "run1"):
            m = med[name]
            lines.append(
                f"| {r['corpus']} | {r['docs']} | {r['mb']:.1f} | {labels[name]} | {m['wall_s']:.2f} "
                f"| {m['cpu_s']:.2f} | {r['mb'] / m['cpu_s']:.3f} | {plain['cpu_s'] / m['cpu_s']:.1f}x "
                f"| {plain['wall_s'] / m['wall_s']:.1f}x | {m['foreign_load']:.2f} |"
            )
        summary.append(
            f"- {r['corpus']}: identical output on every document: "
            f"**{'yes' if not r['differ'] else 'NO, ' + str(len(r['differ'])) + ' differ'}** "
            f"({r['changed_docs']} documents changed); {w} workers vs 1 worker in wall: "
            f"**{med['run1']['wall_s'] / med[f'run{w}']['wall_s']:.2f}x** (the median of the "
            f"rounds' own ratios: {paired_ratio(r['rounds'], w):.2f}x); per CPU-second vs plain "
            f"Presidio: **{med['plain']['cpu_s'] / med[f'run{w}']['cpu_s']:.1f}x**"
        )
    lines += ["", *summary, ""]
    lines += probe_lines(results, w)
    lines += [
        f"Where the wall time of the curate runs goes (medians, s; partition_size {args.partition_size}): "
        "before the first pass (planning; with 2+ workers also the pii setup before the fork, "
        "with 1 worker it is in the first partition), the passes, examples, the rest of "
        "publishing, and outside the build (interpreter start, CLI imports, recipe, fingerprint; "
        "interpreter exit). The last column is not a part of the wall time: the pii stage's "
        "own seconds summed over the partitions, in whichever worker each ran.",
        "",
        "| corpus | contender | wall | before pass | passes | examples | publish | outside | pii stage, all partitions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for name in (f"run{w}", "run1"):
            m = r["median"][name]
            lines.append(
                f"| {r['corpus']} | {labels[name]} | {m['wall_s']:.2f} | {m.get('before_pass_s', 0):.2f} "
                f"| {m.get('passes_s', 0):.2f} | {m.get('examples_s', 0):.2f} | {m.get('publish_s', 0):.2f} "
                f"| {m.get('outside_s', 0):.2f} | {m.get('stage_s', 0):.2f} |"
            )
    lines.append("")
    for r in results:
        one, many = r["median"]["run1"].get("stage_s"), r["median"][f"run{w}"].get("stage_s")
        if one and many:
            lines.append(
                f"- {r['corpus']}: the pii stage's own seconds over all partitions (setup "
                f"excluded) are {many / one:.3f}x with {w} workers what they are with 1 (above "
                "1: the partitions' work slows down when the workers run at once; a partition's "
                "seconds also hold what idle workers computed of it at the pass's end, "
                "`curate.engines.help_desk`, and lack what it computed of another's)."
            )
    lines.append("")
    for r in results:
        counters = r["manifest"].get("stages", [{}])[-1].get("counters", {})
        lines.append(f"The stage's counters ({r['corpus']}): `" + json.dumps(counters) + "`")
        lines.append("")
    lines += [
        f"Setup of one process (Python, curate, Presidio imported without torch/transformers, "
        f"the analyzer built): {setup['process_cpu']:.2f} CPU s. With the local engine's forked "
        "workers it is paid once, in the driver, before the fork.",
        "",
        f"Where the time goes, first {args.profile_mb} MB of the docs corpus (each recognizer's "
        "`analyze`, CPU seconds, caches cold):",
        "",
        "| recognizer | plain Presidio | as curate runs it | ratio |",
        "|---|---|---|---|",
    ]
    for name, a, b in sorted(profile, key=lambda x: -x[1]):
        lines.append(f"| {name} | {a:.2f} | {b:.2f} | {a / max(b, 1e-9):.1f}x |")
    kinds = " ".join(
        f"--corpus {r['corpus'].split('-')[0].replace('corpus', 'docs')}" for r in results
    )
    lines += [
        "",
        f"Command: `python -m benchmarks.pii --mb {args.mb} --workers {w} --rounds {args.rounds} {kinds}"
        + ("" if args.partition_size == "2MB" else f" --partition-size {args.partition_size}")
        + ("" if args.plain_rounds is None else f" --plain-rounds {args.plain_rounds}")
        + ("" if args.probe_mb == 0.5 else f" --probe-mb {args.probe_mb}")
        + "`",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    stem = "pii" if args.mb == 50 else f"pii-{args.mb}"
    if args.partition_size != "2MB":  # another recipe: never in place of the main figures
        stem += f"-partition-{args.partition_size}"
    (RESULTS / f"{stem}.md").write_text("\n".join(lines))
    (RESULTS / f"{stem}.json").write_text(json.dumps(
        {"results": [{k: v for k, v in r.items() if k != "manifest"} for r in results],
         "profile": profile, "setup": setup}, indent=1))  # fmt: skip
    print("\n".join(lines))


if __name__ == "__main__":
    main()
