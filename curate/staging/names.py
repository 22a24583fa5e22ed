"""Every name in a run's staging folder, defined here and nowhere else.

```
.staging-<fingerprint>/            named by the store (`Store.staging`); one per fingerprint
  pass-<k>/                        one folder per pass (k = 0, 1, ...: a pass ends at a barrier)
    part-KKKK.json                 partition K's completion record (`record.PartitionRecord`)
    part-KKKK.ckpt.json            its checkpoint while it runs (`record.Checkpoint`)
    packer-KKKK-NNNNN.pkl          the packers' carried rows at the checkpoint after flush N
    tail-KKKK.arrow                final pass, packed: what K's short last row would hold
                                   (with a split: tail-KKKK-<split>.arrow), for the tail shard
    part-KKKK.attempts             Ray only: runs of partition K in this pass so far
    data-KKKK-SSSSS.arrow          rows staged for the next pass, segment S (none when the
                                   record's rows_from says where they are already:
                                   `curate.engines.staged_rows`)
    summary-KKKK-SSSSS.arrow       their summaries for this pass's barrier, segment S
    rejected-KKKK-NNNNN.arrow      rows a map stage removed, flush N
    rejected-KKKK-barrier.arrow    rows the previous pass's barrier removed
    quarantine-KKKK-NNNNN.arrow    records that could not be read, flush N
    examples-KKKK-NNNNN.arrow      removed documents chosen as examples, text and all, flush N
    decision.json                  the barrier decided (what it reported); a rerun skips it
    decision-KKKK.arrow            the ids the barrier drops from partition K (read by pass k+1)
    collective/                    the local engine's spill while deciding (Ray's: collective-*)
  nodes/<kind>.<node>.<id>         Ray only: a marker per task run, named by the node it
                                   ran on (`curate.engines.ray.placement`)
  progress-<k>/KKKK                documents and bytes partition K has read in pass k so far,
                                   rewritten by its worker a few times a second (for the
                                   driver's progress line; removed when the pass ends)
  out/                             the version being built, renamed into place at publish:
    shards/part-KKKK-IIIII.arrow     its shards (with a split: <split>/shards/...)
    shards/tail-00000.arrow          packed versions: every partition's tail, packed at publish
```

K is the partition's key (`Partition.key`, 16 hex digits of what it holds: its input's
name and range, `curate.io.partition_key`), never its place in the run's plan, so a
partition's files keep their names when other inputs come or go. S, N and I count from 0
within the partition. Records name their files by paths relative to the staging folder
(`pass-0/rejected-<key>-00000.arrow`), the form `relative` gives and `resolve` checks. At
publish, side outputs move to `rejected/` and `quarantine/` of the version as
`pass<k>-KKKK-NNNNN.arrow` (`published_side_name`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curate.paths import escape

DATA = "data"
"""Prefix of the staged data files, which `io.shards.ShardWriter` names `data-KKKK-SSSSS.arrow`."""

OUT = "out"
"""The folder that becomes the version; shard paths in records start with it."""


@dataclass(frozen=True)
class Staging:
    """A run's staging folder (`root`, `.staging-<fingerprint>` in the dataset's folder)."""

    root: Path

    def pass_dir(self, k: int) -> Path:
        return self.root / f"pass-{k}"

    # -- one partition's files in pass k ----------------------------------------------
    def record(self, k: int, partition: str) -> Path:
        return self.pass_dir(k) / f"part-{partition}.json"

    def checkpoint(self, k: int, partition: str) -> Path:
        return self.pass_dir(k) / f"part-{partition}.ckpt.json"

    def packer(self, k: int, partition: str, flush: int) -> Path:
        """The packers' carried rows at the checkpoint taken after side-output flush N."""
        return self.pass_dir(k) / f"packer-{partition}-{flush:05d}.pkl"

    def tail(self, k: int, partition: str, split: str | None = None) -> Path:
        """Partition K's packing tail (`curate.output.tails`), per split."""
        suffix = f"-{split}" if split else ""
        return self.pass_dir(k) / f"tail-{partition}{suffix}.arrow"

    def progress_dir(self, k: int) -> Path:
        return self.root / f"progress-{k}"

    def progress(self, k: int, partition: str) -> Path:
        return self.progress_dir(k) / partition

    def attempts(self, k: int, partition: str) -> Path:
        return self.pass_dir(k) / f"part-{partition}.attempts"

    @property
    def nodes(self) -> Path:
        """Ray only: where each task leaves a marker naming the node it ran on."""
        return self.root / "nodes"

    def summary(self, k: int, partition: str, segment: int) -> Path:
        return self.pass_dir(k) / f"summary-{partition}-{segment:05d}.arrow"

    def staged_data(self, k: int, partition: str) -> list[Path]:
        """The data files partition K staged in pass k for the next pass, in segment order."""
        return sorted(self.pass_dir(k).glob(f"{DATA}-{partition}-*.arrow"))

    def rejected(self, k: int, partition: str, flush: int) -> Path:
        return self.pass_dir(k) / f"rejected-{partition}-{flush:05d}.arrow"

    def barrier_rejected(self, k: int, partition: str) -> Path:
        return self.pass_dir(k) / f"rejected-{partition}-barrier.arrow"

    def examples(self, k: int, partition: str, flush: int) -> Path:
        """The removed documents a map stage's rows chose as examples (`curate.examples`)."""
        return self.pass_dir(k) / f"examples-{partition}-{flush:05d}.arrow"

    def quarantine(self, k: int, partition: str, flush: int) -> Path:
        return self.pass_dir(k) / f"quarantine-{partition}-{flush:05d}.arrow"

    # -- the barrier at the end of pass k ---------------------------------------------
    def decided(self, k: int) -> Path:
        """The marker of a decision made, holding what it reported."""
        return self.pass_dir(k) / "decision.json"

    def decision(self, k: int, partition: str) -> Path:
        return self.pass_dir(k) / f"decision-{partition}.arrow"

    def decisions(self, k: int) -> list[Path]:
        """Every decision file of pass k (an interrupted decision's, to remove first)."""
        return list(self.pass_dir(k).glob("decision-*.arrow"))

    def spill(self, k: int) -> Path:
        return self.pass_dir(k) / "collective"

    # -- the whole folder -------------------------------------------------------------
    @property
    def out(self) -> Path:
        return self.root / OUT

    def first_pass_records(self) -> list[Path]:
        """Pass 0's completion records and checkpoints (both hold the input's identity)."""
        first = self.pass_dir(0)
        return sorted(first.glob("part-*.json")) if first.is_dir() else []

    def relative(self, path: Path) -> str:
        """How a record names a file of this folder."""
        return path.relative_to(self.root).as_posix()

    def resolve(self, name: str) -> Path | None:
        """The file a record names, or None when the name would lead out of this folder
        (the run moves what records name into the version: never a file from elsewhere)."""
        return None if escape(self.root, name) is not None else self.root / name


def version_path(name: str) -> str:
    """A final shard's path in the version, from its path in the staging folder."""
    return name.removeprefix(f"{OUT}/")


def published_side_name(k: int, name: str) -> str:
    """The name a staged side output (`rejected-KKKK-NNNNN.arrow`, `quarantine-...`) of
    pass k takes in the version's `rejected/` or `quarantine/`: `pass<k>-KKKK-NNNNN.arrow`."""
    return f"pass{k}-{Path(name).name.split('-', 1)[1]}"
