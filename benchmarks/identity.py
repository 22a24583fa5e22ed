"""Byte-identity check: the same builds at a base commit and at a head, compared file by file.

    python -m benchmarks.identity --base dfd99bd                  # head: this checkout
    python -m benchmarks.identity --base dfd99bd --head main      # head: a rev
    python -m benchmarks.identity --base dfd99bd --head /work/wt/x --only corpus --engine local-2

Builds every runnable recipe of the base commit's recipes/ (the template with its paths
pointed at sample_data/) and the generated 22 MB corpus recipe (benchmarks/identity_cases.py),
each with the local engine on 1 and 2 workers and on a local Ray instance, once with the
base commit's curate and once with the head's (``PYTHONPATH=<tree>``, this interpreter),
then compares every file the builds wrote (shards, rejected/, quarantine/, manifests,
state, LATEST and index files) byte for byte. A manifest is compared as JSON after
dropping exactly the keys in VOLATILE_MANIFEST_KEYS (times and the host); the lock files
in PID_FILES hold a process id, so only their presence is compared; everything else, and
every other file, must be identical. Whether each build succeeded (or its error message)
must agree too. It prints a per-build, per-file summary and exits 1 on any difference.

The base commit is exported with ``git archive`` into ``<cache>/trees`` (a head rev too;
a head path is used as it is, uncommitted changes included), not a git worktree: nothing
to prune when a run is stopped. Its outputs are kept under
``<cache>/<base commit>/base`` and reused while the harness builds the same recipes, so a
later run only builds the head. Each build runs in the same scratch folder on both sides,
so the absolute paths a manifest records agree; the inputs (a copy of the base's
sample_data/ and recipes/, and the corpus) are written once per cache and shared. One
run at a time per cache (a lock; others wait).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import fnmatch
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import identity_corpus
from benchmarks.identity_cases import ENGINES, Case, Engine, all_cases
from benchmarks.trees import CACHE, export, resolve_head, rev_parse

REPO = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "identity_driver.py"
# Bump when what is built changes in a way the plan digest does not see.
FORMAT = 1

VOLATILE_MANIFEST_KEYS: dict[str, str] = {
    "started": "wall-clock time the build began",
    "finished": "wall-clock time the build ended",
    "timings": "seconds per phase and pass",
    "host": "hostname, platform and CPU count of the machine",
    "stages.*.seconds": "seconds each stage took",
    "stages.*.details.decide_seconds": "seconds a barrier's decision took (minhash_dedup)",
    "stages.*.details.decision.seconds": "seconds a barrier's decision step took",
}
"""Manifest keys dropped before comparing (dotted paths; * is any list index or key).
Nothing else is: the inputs' absolute paths agree because both sides build in the same
scratch folder on the same input files."""

PID_FILES: dict[str, str] = {
    ".lock-*": "a build's lock file holds the process id that took it",
    ".publish.lock": "the publish lock holds the process id that took it",
}
"""Files (fnmatch on the name) that must exist on both sides but hold a process id."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="dfd99bd", help="commit whose outputs are the reference")
    parser.add_argument("--head", help="a tree (path) or a rev; default: this checkout")
    parser.add_argument("--cache", type=Path, default=CACHE, help="outputs kept here")
    parser.add_argument(
        "--only", action="append", help="build only these cases (recipe names, corpus)"
    )
    parser.add_argument(
        "--engine", action="append", choices=[e.name for e in ENGINES], help="only these settings"
    )
    parser.add_argument("--rebuild-base", action="store_true", help="ignore cached base outputs")
    args = parser.parse_args()

    base_sha = rev_parse(args.base)
    root = args.cache / f"{base_sha[:12]}-f{FORMAT}-c{identity_corpus.FORMAT}"
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / "lock", args.head or str(REPO)):
        started = time.perf_counter()
        base_tree = export(base_sha, args.cache / "trees")
        head_tree, head_label = resolve_head(args.head, args.cache / "trees")
        inputs = prepare_inputs(root / "inputs", base_tree)
        cases, skipped = all_cases(inputs)
        if args.only:
            unknown = set(args.only) - {c.name for c in cases}
            if unknown:
                raise SystemExit(f"no such case: {', '.join(sorted(unknown))}")
            cases = [c for c in cases if c.name in args.only]
        engines = [e for e in ENGINES if not args.engine or e.name in args.engine]
        print(f"base {base_sha[:12]} ({base_tree}), head {head_label} ({head_tree})")
        for line in skipped:
            print(f"skipped {line}")
        for case in cases:
            if case.note:
                print(f"{case.name}: {case.note}")
        build_side("base", base_tree, root, inputs, cases, engines, reuse=not args.rebuild_base)
        head_side = f"head-{head_slug(head_tree)}"
        build_side(head_side, head_tree, root, inputs, cases, engines, reuse=False)
        differences = 0
        for engine in engines:
            for case in cases:
                differences += compare_build(root, case, engine, head_side)
        total = len(cases) * len(engines)
        elapsed = time.perf_counter() - started
        if differences:
            print(f"\nDIFFERENT: {differences} difference(s) in {total} builds ({elapsed:.0f} s)")
            sys.exit(1)
        print(
            f"\nIDENTICAL: {total} builds at {head_label} match {base_sha[:12]} ({elapsed:.0f} s)"
        )


# --- inputs and builds ---------------------------------------------------------------


def prepare_inputs(inputs: Path, base_tree: Path) -> Path:
    """sample_data/ and recipes/ of the base commit and the corpus, written once."""
    stamp = inputs / ".ready"
    if stamp.exists():
        return inputs
    shutil.rmtree(inputs, ignore_errors=True)
    inputs.mkdir(parents=True)
    shutil.copytree(base_tree / "sample_data", inputs / "sample_data")
    shutil.copytree(base_tree / "recipes", inputs / "recipes")
    print("writing the generated corpus (once per cache) ...", flush=True)
    counts = identity_corpus.write(inputs / "corpus")
    stamp.write_text(json.dumps(counts) + "\n")
    return inputs


def head_slug(tree: Path) -> str:
    """A folder name for a head's outputs: its tree's name and a hash of its path, so each
    head keeps its last outputs (to look into a difference) and two heads never mix."""
    digest = hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:8]
    return f"{tree.resolve().name[:24]}-{digest}"


def build_key(case: Case, engine: Engine) -> str:
    """What a cached base build was made from: the recipe text and links."""
    text = json.dumps([FORMAT, case.text(engine), case.links], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def build_dir(root: Path, side: str, case: Case, engine: Engine) -> Path:
    return root / side / engine.name / case.name


def build_side(
    side: str,
    tree: Path,
    root: Path,
    inputs: Path,
    cases: list[Case],
    engines: list[Engine],
    reuse: bool,
) -> None:
    """Build every (case, engine) with tree's curate, one driver process per engine."""
    for engine in engines:
        todo = []
        for case in cases:
            dest = build_dir(root, side, case, engine)
            key_file = dest.parent / f"{case.name}.key"
            if reuse and key_file.exists() and key_file.read_text() == build_key(case, engine):
                continue
            key_file.unlink(missing_ok=True)
            todo.append(case)
        if not todo:
            print(f"{side} {engine.name}: cached", flush=True)
            continue
        print(f"{side} {engine.name}: building {', '.join(c.name for c in todo)}", flush=True)
        run_driver(side, tree, root, inputs, todo, engine)


def run_driver(
    side: str, tree: Path, root: Path, inputs: Path, cases: list[Case], engine: Engine
) -> None:
    builds = [
        {
            "name": case.name,
            "scratch": str(root / "scratch" / engine.name / case.name),
            "files": {f"recipes/{case.name}.yaml": case.text(engine)},
            "links": {name: str(inputs / target) for name, target in case.links.items()},
            "recipe": f"recipes/{case.name}.yaml",
            "dest": str(build_dir(root, side, case, engine)),
        }
        for case in cases
    ]
    work = root / "driver"
    work.mkdir(exist_ok=True)
    plan, result = work / f"{side}-{engine.name}.json", work / f"{side}-{engine.name}-result.json"
    plan.write_text(
        json.dumps({"engine": engine.kind, "workers": engine.workers, "builds": builds})
    )
    result.unlink(missing_ok=True)
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "RAY_ADDRESS")
    }
    env["PYTHONPATH"] = str(tree)
    log = work / f"{side}-{engine.name}.log"
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    with open(log, "wb") as err:
        done = subprocess.run(
            [sys.executable, "-P", str(DRIVER), str(plan), str(result)],
            env=env,
            cwd="/",
            stderr=err,
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(
        f"  {side} {engine.name}: {time.perf_counter() - started:.0f} s, "
        f"{cpu:.0f} CPU-s (the driver and the workers reaped under it; not Ray's)",
        flush=True,
    )
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise SystemExit(
            f"{side} {engine.name}: the driver failed ({done.returncode}); {log}:\n{tail}"
        )
    outcomes = {r["name"]: r for r in json.loads(result.read_text())}
    for name, outcome in outcomes.items():
        if not Path(outcome["curate"]).resolve().is_relative_to(tree.resolve()):
            raise SystemExit(f"{side} {name} imported {outcome['curate']}, not {tree}'s curate")
    for case in cases:
        dest = build_dir(root, side, case, engine)
        (dest / "outcome.json").write_text(json.dumps(outcomes[case.name]["outcome"]) + "\n")
        (dest.parent / f"{case.name}.key").write_text(build_key(case, engine))


# --- comparison ----------------------------------------------------------------------


def compare_build(root: Path, case: Case, engine: Engine, head_side: str) -> int:
    """Print how head's build of (case, engine) differs from base's; the number of differences."""
    base = build_dir(root, "base", case, engine)
    head = build_dir(root, head_side, case, engine)
    label = f"{case.name} @ {engine.name}"
    problems: list[str] = []
    base_outcome = json.loads((base / "outcome.json").read_text())
    head_outcome = json.loads((head / "outcome.json").read_text())
    if base_outcome != head_outcome:
        problems.append(f"outcome: base {base_outcome!r}, head {head_outcome!r}")
    base_files, head_files = files_under(base / "curated"), files_under(head / "curated")
    for name in sorted(base_files.keys() - head_files.keys()):
        problems.append(f"{name}: only at base")
    for name in sorted(head_files.keys() - base_files.keys()):
        problems.append(f"{name}: only at head")
    for name in sorted(base_files.keys() & head_files.keys()):
        problems += compare_file(name, base_files[name], head_files[name])
    if problems:
        kinds = Counter(_kind(line.split(": ", 1)[0]) for line in problems)
        summary = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
        print(f"DIFFERENT {label}: {len(problems)} difference(s): {summary}")
        print(f"    base {base}\n    head {head}")
        for line in problems[:40]:
            print(f"    {line}")
        if len(problems) > 40:
            print(f"    ... and {len(problems) - 40} more")
    else:
        print(f"identical {label}: {len(base_files)} files ({base_outcome})")
    return len(problems)


def _kind(name: str) -> str:
    """What a differing path is, for the summary line: 'manifest', 'shards', 'rejected', ..."""
    parts = name.split("/")
    if parts[-1] == "manifest.json":
        return "manifest"
    if any(fnmatch.fnmatchcase(parts[-1], pattern) for pattern in PID_FILES):
        return "lock files"
    for part in ("shards", "rejected", "quarantine", ".index", ".locks"):
        if part in parts[:-1]:
            return part
    return parts[-1]


def files_under(folder: Path) -> dict[str, Path]:
    """Every file and symbolic link under folder, by path relative to it."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath) / name
            found[str(path.relative_to(folder))] = path
    return found


def compare_file(name: str, base: Path, head: Path) -> list[str]:
    if base.is_symlink() or head.is_symlink():
        same = base.is_symlink() == head.is_symlink() and os.readlink(base) == os.readlink(head)
        return [] if same else [f"{name}: symbolic links differ"]
    if any(fnmatch.fnmatchcase(base.name, pattern) for pattern in PID_FILES):
        return []
    a, b = base.read_bytes(), head.read_bytes()
    if base.name == "manifest.json":
        return compare_manifest(name, a, b)
    if a == b:
        return []
    return [f"{name}: {describe_bytes(a, b)}"]


def compare_manifest(name: str, a: bytes, b: bytes) -> list[str]:
    try:
        left, right = json.loads(a), json.loads(b)
    except ValueError:
        return [] if a == b else [f"{name}: not JSON and {describe_bytes(a, b)}"]
    diffs: list[str] = []
    json_diff(drop_volatile(left), drop_volatile(right), "", diffs)
    return [f"{name}: {d}" for d in diffs]


def drop_volatile(manifest: Any) -> Any:
    """The manifest without the keys VOLATILE_MANIFEST_KEYS names (a copy)."""
    patterns = [key.split(".") for key in VOLATILE_MANIFEST_KEYS]

    def strip(value: Any, path: list[str]) -> Any:
        if isinstance(value, dict):
            return {
                k: strip(v, [*path, k])
                for k, v in value.items()
                if not any(_matches(p, [*path, k]) for p in patterns)
            }
        if isinstance(value, list):
            return [strip(v, [*path, "*"]) for v in value]
        return value

    return strip(manifest, [])


def _matches(pattern: list[str], path: list[str]) -> bool:
    return len(pattern) == len(path) and all(
        p in ("*", q) for p, q in zip(pattern, path, strict=True)
    )


def json_diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() - b.keys():
            out.append(f"{where}.{key}: only at base")
        for key in b.keys() - a.keys():
            out.append(f"{where}.{key}: only at head")
        for key in a.keys() & b.keys():
            json_diff(a[key], b[key], f"{where}.{key}", out)
        if a.keys() == b.keys() and list(a) != list(b):
            out.append(f"{where or '.'}: the same keys in another order")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items at base, {len(b)} at head")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            json_diff(x, y, f"{where}[{i}]", out)
    elif a != b or type(a) is not type(b):
        out.append(f"{where}: base {_short(a)}, head {_short(b)}")


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_bytes(a: bytes, b: bytes) -> str:
    if len(a) != len(b):
        return f"{len(a)} bytes at base, {len(b)} at head"
    first = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    return f"same size ({len(a)} bytes), first different byte at offset {first}"


@contextlib.contextmanager
def locked(path: Path, holder: str) -> Iterator[None]:
    """Hold path's lock (waiting for it, saying whose run holds it); write holder into it."""
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            print(f"waiting for another identity run ({handle.read().strip()}) ...", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, head {holder}, since {time.strftime('%H:%M:%S')}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


if __name__ == "__main__":
    main()
