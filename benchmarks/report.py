"""Turn measured runs into medians, ratios against curate, target verdicts and markdown.

Ratios are taken between medians of the same run of the benchmark: the machine is
shared and noisy, so absolute seconds move from run to run while ratios hold.
"""

from __future__ import annotations

import platform
import statistics
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import psutil

from benchmarks.contenders import curate_folder
from benchmarks.corpus import MB, CorpusInfo
from benchmarks.measure import MIB, Measurement
from benchmarks.outputs import Digest

CURATE = "curate"
ORDER = [CURATE, "curate (fsync: false)", "floor", "HF datasets", "datatrove"]
# "Peak memory flat from 100 MB to 400 MB": the peak at the large size may exceed the
# peak at the small one by at most this factor.
FLAT_MEMORY = 1.25


@dataclass
class Run:
    size_mb: int
    contender: str
    round: int
    measurement: Measurement
    digest: Digest
    checksum_s: float | None = None
    written_bytes: int | None = None
    attempts: int = 1


@dataclass
class Summary:
    size_mb: int
    contender: str
    corpus_mb: float
    runs: list[Run] = field(default_factory=list)

    def median(self, attribute: str) -> float:
        return statistics.median(getattr(run.measurement, attribute) for run in self.runs)

    @property
    def wall(self) -> float:
        return self.median("wall_s")

    @property
    def cpu(self) -> float:
        return self.median("cpu_s")

    @property
    def peak_tree(self) -> float:
        return self.median("peak_tree_rss")

    @property
    def peak_proc(self) -> float:
        return self.median("peak_proc_rss")

    @property
    def checksum_s(self) -> float | None:
        values = [run.checksum_s for run in self.runs if run.checksum_s is not None]
        return statistics.median(values) if values else None


def summarize(runs: list[Run], corpora: dict[int, CorpusInfo]) -> dict[tuple[int, str], Summary]:
    summaries: dict[tuple[int, str], Summary] = {}
    for run in runs:
        key = (run.size_mb, run.contender)
        corpus_mb = corpora[run.size_mb].bytes / MB
        summaries.setdefault(key, Summary(run.size_mb, run.contender, corpus_mb)).runs.append(run)
    return summaries


def _table_order(item: tuple[tuple[int, str], Summary]) -> tuple[int, int]:
    (size, name), _ = item
    return size, ORDER.index(name) if name in ORDER else len(ORDER)


def _ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.2f}x" if reference else "n/a"


def table(summaries: dict[tuple[int, str], Summary], reference: dict[int, Digest]) -> list[str]:
    """Markdown table rows, one per size and contender."""
    lines = [
        "| size | contender | wall s | MB/s | CPU-s | CPU-s/MB | peak tree RSS MiB "
        "| peak proc RSS MiB | wall / curate's | CPU / curate's | docs out | same docs "
        "| same order |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for (size, name), s in sorted(summaries.items(), key=_table_order):
        curate = summaries.get((size, CURATE))
        digests = {run.digest for run in s.runs}
        same_docs = all(
            (d.docs, d.documents) == (reference[size].docs, reference[size].documents)
            for d in digests
        )
        same_order = all(d.order == reference[size].order for d in digests)
        lines.append(
            f"| {size} MB | {name} | {s.wall:.2f} | {s.corpus_mb / s.wall:.1f} | {s.cpu:.2f} "
            f"| {s.cpu / s.corpus_mb:.4f} | {s.peak_tree / MIB:.0f} | {s.peak_proc / MIB:.0f} "
            f"| {_ratio(s.wall, curate and curate.wall)} | {_ratio(s.cpu, curate and curate.cpu)} "
            f"| {s.runs[0].digest.docs} | {'yes' if same_docs else '**NO**'} "
            f"| {'yes' if same_order else 'no'} |"
        )
    return lines


@dataclass
class Target:
    text: str
    measured: str
    met: bool | None


def targets(summaries: dict[tuple[int, str], Summary], sizes: list[int]) -> list[Target]:
    """The acceptance targets, judged at the largest size (memory: smallest to largest)."""
    big, small = max(sizes), min(sizes)
    curate = summaries.get((big, CURATE))
    # (target, peer, how many times curate's wall the peer's must be at least)
    wall_targets = [
        (f"{big} MB: curate within 1.5x of the floor's wall time", "floor", 1 / 1.5),
        (f"{big} MB: curate >= 5x faster than HF datasets", "HF datasets", 5.0),
        (f"{big} MB: curate >= 3x faster than datatrove", "datatrove", 3.0),
    ]
    found = []
    for text, peer, factor in wall_targets:
        other = summaries.get((big, peer))
        if other is None:
            continue
        if curate is None:
            found.append(Target(text, "curate not measured", None))
            continue
        if peer == "floor":
            measured = f"curate / floor = {curate.wall / other.wall:.2f}x"
        else:
            measured = f"{peer} / curate = {other.wall / curate.wall:.2f}x"
        found.append(Target(text, measured, other.wall >= factor * curate.wall))
    low, high = summaries.get((small, CURATE)), summaries.get((big, CURATE))
    if low and high and small != big:
        found.append(
            Target(
                f"curate peak tree RSS flat from {small} to {big} MB (<= {FLAT_MEMORY}x)",
                f"{low.peak_tree / MIB:.0f} -> {high.peak_tree / MIB:.0f} MiB "
                f"({high.peak_tree / low.peak_tree:.2f}x)",
                high.peak_tree <= FLAT_MEMORY * low.peak_tree,
            )
        )
    return found


def noise(runs: list[Run]) -> str:
    """How much other work shared the machine during the runs that were kept."""
    loads = [run.measurement.foreign_load for run in runs]
    repeated = sum(run.attempts > 1 for run in runs)
    return (
        f"Other processes kept {statistics.median(loads):.2f} cores busy during the median "
        f"kept run (at most {max(loads):.2f}); {repeated} of {len(runs)} runs were repeated "
        "because the machine was busy (the quietest attempt is kept)."
    )


def costs(summaries: dict[tuple[int, str], Summary]) -> list[str]:
    """What checksums and fsync cost curate, which the floor does not pay."""
    lines = []
    for (size, name), s in sorted(summaries.items()):
        if name != CURATE or s.checksum_s is None:
            continue
        written = statistics.median(run.written_bytes or 0 for run in s.runs) / MB
        line = (
            f"- {size} MB: sha256 over the {written:.0f} MB of shards curate wrote takes "
            f"{s.checksum_s:.2f} s on one core ({written / s.checksum_s:.0f} MB/s)"
        )
        nosync = summaries.get((size, "curate (fsync: false)"))
        if nosync:
            line += (
                f"; fsync on costs {s.wall - nosync.wall:+.2f} s wall "
                f"({s.wall:.2f} s with, {nosync.wall:.2f} s without)"
            )
        lines.append(line + ".")
    return lines


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def curate_source(executable: str) -> str:
    """Which curate the CLI runs: its folder, commit and whether that tree is dirty."""
    folder = curate_folder(executable)
    git = ["git", "-C", str(folder)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "curate"], capture_output=True)
    if commit.returncode != 0:
        return f"curate from {folder} (not a git checkout)"
    state = " with uncommitted changes" if dirty.stdout.strip() else ""
    return f"curate from {folder} at commit {commit.stdout.strip()}{state}"


def machine(curate_executable: str | None = None) -> list[str]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    packages = ["curate", "pyarrow", "datasets", "datatrove", "polars", "xxhash", "orjson"]
    return [
        f"- machine: {psutil.cpu_count()} CPUs ({model}), "
        f"{psutil.virtual_memory().total / (1 << 30):.1f} GiB RAM, {platform.platform()}",
        f"- Python {platform.python_version()}; "
        + ", ".join(f"{p} {_version(p)}" for p in packages),
        *([f"- {curate_source(curate_executable)}"] if curate_executable else []),
    ]
