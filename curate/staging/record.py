"""What one partition leaves in one pass: its completion record, and its checkpoint meanwhile.

A record (`part-KKKK.json`) is written last, atomically, after every file it names is
complete, so it is both the marker a resumed run trusts (`completed`: present, and every
file it names intact) and the partition's fragment of the manifest, which the driver
merges (`curate.accounting`). While a partition runs, its checkpoint (`part-KKKK.ckpt.json`)
holds the record so far and where to continue. On disk both are the `to_json()` form with
sorted keys; a run interrupted on one engine resumes on another from the same files.

Room for more: what later work records per partition (statistics, examples, lineage)
becomes an optional field here, left out of the JSON while it is None, as `input_stat` is.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.stages.base import StageCounts
from curate.staging.names import Staging

FileInfo = dict[str, Any]
"""One file a record names, as `io.shards.ShardInfo.to_dict()` gives it: its path relative
to the staging folder, rows, bytes, sha256 (empty for staged data, checked by size only)."""


@dataclass
class PartitionFiles:
    """The files a partition completed in one pass, each named relative to the staging folder."""

    shards: list[FileInfo] = field(default_factory=list)  # the final pass's shards, in out/
    segments: list[dict[str, FileInfo]] = field(default_factory=list)  # {"data", "summary"}
    rejected: list[FileInfo] = field(default_factory=list)
    quarantine: list[FileInfo] = field(default_factory=list)
    tails: list[FileInfo] = field(default_factory=list)  # packed: the final pass's tail files
    examples: list[FileInfo] = field(default_factory=list)  # chosen removed documents' text
    lineage: list[FileInfo] = field(default_factory=list)  # final pass: `curate.lineage`'s rows

    def listed(self) -> list[FileInfo]:
        files = [*self.shards, *self.rejected, *self.quarantine, *self.tails, *self.examples]
        files += self.lineage
        return files + [seg[name] for seg in self.segments for name in ("data", "summary")
                        if name in seg]  # fmt: skip

    def intact(self, staging: Staging) -> bool:
        """Every file named is inside the staging folder (the run moves them into the version:
        never a file from elsewhere) and has the size it had when completed."""
        for info in self.listed():
            path = staging.resolve(info["path"])
            if path is None or not path.is_file() or path.stat().st_size != info["bytes"]:
                return False
        return True

    def to_json(self) -> dict[str, Any]:
        data = {
            "shards": self.shards,
            "segments": self.segments,
            "rejected": self.rejected,
            "quarantine": self.quarantine,
        }
        optional = {"tails": self.tails, "examples": self.examples, "lineage": self.lineage}
        return data | {key: value for key, value in optional.items() if value}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartitionFiles:
        return cls(
            data["shards"], data["segments"], data["rejected"], data["quarantine"],
            data.get("tails", []), data.get("examples", []), data.get("lineage", []),
        )  # fmt: skip


@dataclass
class PartitionRecord:
    """One partition's counts and files after one pass (the JSON names `pass_index` "pass")."""

    partition: str  # the partition's key (`Partition.key`), never its place in a run's plan
    pass_index: int
    input: str  # the input file's name (`InputFile.name`)
    read: int = 0  # documents read from the input (first pass; 0 after)
    quarantined: int = 0
    quarantined_bytes: int = 0
    stages: dict[int, StageCounts] = field(default_factory=dict)  # by position in the recipe
    files: PartitionFiles = field(default_factory=PartitionFiles)
    input_stat: list[int] | None = None  # first pass: the input's identity when read
    digest: str | None = None  # first pass: what the partition held (`io.partition_digest`)
    quarantine_reasons: dict[str, int] | None = None  # counts by reason (quarantine_limits)
    fields_present: dict[str, list[str]] | None = None  # field names seen, by reason
    seconds: float | None = None  # the pass's time; None until complete (a checkpoint's)
    cache_key: str | None = None  # the stage cache's key of the rows the pass ended with
    cache: dict[str, Any] | None = None  # what the pass took from the stage cache (`reused`)
    rows_from: dict[str, Any] | None = None  # rows not staged: where they are (`staged_rows`)
    forgotten: int = 0  # documents `curate forget` removed, dropped in this pass
    unlisted: int = 0  # quarantined records `curate forget` removed from the listing
    ahead: list[dict[str, Any]] = field(default_factory=list)  # forgotten ones' next summaries

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "partition": self.partition,
            "pass": self.pass_index,
            "input": self.input,
            "read": self.read,
            "quarantined": self.quarantined,
            "quarantined_bytes": self.quarantined_bytes,
            "stages": {str(pos): counts.to_dict() for pos, counts in self.stages.items()},
            "files": self.files.to_json(),
        }
        optional = {
            "input_stat": self.input_stat,
            "digest": self.digest,
            "quarantine_reasons": self.quarantine_reasons,
            "fields_present": self.fields_present,
            "seconds": self.seconds,
            "cache_key": self.cache_key,
            "cache": self.cache,
            "rows_from": self.rows_from,
            "forgotten": self.forgotten or None,
            "unlisted": self.unlisted or None,
            "ahead": self.ahead or None,
        }
        return data | {key: value for key, value in optional.items() if value is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartitionRecord:
        return cls(
            partition=data["partition"],
            pass_index=data["pass"],
            input=data["input"],
            read=data["read"],
            quarantined=data["quarantined"],
            quarantined_bytes=data["quarantined_bytes"],
            stages={int(pos): StageCounts.from_dict(c) for pos, c in data["stages"].items()},
            files=PartitionFiles.from_json(data["files"]),
            input_stat=data.get("input_stat"),
            digest=data.get("digest"),
            quarantine_reasons=data.get("quarantine_reasons"),
            fields_present=data.get("fields_present"),
            seconds=data.get("seconds"),
            cache_key=data.get("cache_key"),
            cache=data.get("cache"),
            rows_from=data.get("rows_from"),
            forgotten=data.get("forgotten") or 0,
            unlisted=data.get("unlisted") or 0,
            ahead=list(data.get("ahead") or []),
        )


def segment_rows(segment: dict[str, Any]) -> int:
    """Rows a staged segment holds for the next pass (written, or only referenced)."""
    return int(segment["data"]["rows"] if "data" in segment else segment["rows"])


@dataclass
class Checkpoint:
    """Where an interrupted partition continues: the record so far, the source chunks it
    consumed, the side-output flushes done, and whether the packers' state was saved
    (`Staging.packer`)."""

    record: PartitionRecord
    consumed: int
    flushes: int
    packer: str | None = None  # the packer file's name, when the packers carry rows

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "record": self.record.to_json(),
            "consumed": self.consumed,
            "flushes": self.flushes,
        }
        return data if self.packer is None else data | {"packer": self.packer}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoint:
        record = PartitionRecord.from_json(data["record"])
        return cls(record, data["consumed"], data["flushes"], data.get("packer"))


def completed(staging: Staging, k: int, partition: str) -> PartitionRecord | None:
    """Partition K's record of pass k, when a previous run completed it and its files are
    intact; None means the partition runs (again)."""
    path = staging.record(k, partition)
    if not path.exists():
        return None
    record = PartitionRecord.from_json(json.loads(path.read_text()))
    return record if record.files.intact(staging) else None


def resumable(staging: Staging, k: int, partition: str) -> Checkpoint | None:
    """Partition K's checkpoint in pass k, when every file it names is intact."""
    path = staging.checkpoint(k, partition)
    if not path.exists():
        return None
    checkpoint = Checkpoint.from_json(json.loads(path.read_text()))
    return checkpoint if checkpoint.record.files.intact(staging) else None


def files_intact(root: Path, files: dict[str, Any]) -> bool:
    """`PartitionFiles.intact` of a record's "files" as JSON, in the staging folder `root`."""
    return PartitionFiles.from_json(files).intact(Staging(root))


def write_json(path: Path, data: dict[str, Any], fsync: bool) -> None:
    """Atomically, so a record on disk always describes files that are complete."""
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
