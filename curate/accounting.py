"""From the partitions' completion records to the manifest's accounting.

Pure functions: every count in a manifest is a sum over the records the workers left,
so the same records always give the same manifest, whichever engine ran them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.fingerprint import stage_software
from curate.io.inputs import InputFile
from curate.io.partitions import Partition
from curate.manifest import (
    Counts,
    FileRecord,
    InputRecord,
    Packing,
    PartitionEntry,
    SplitRecord,
    Splits,
    StageCacheRecord,
    StageRecord,
)
from curate.output.packing import PackSpec
from curate.output.splits import HASH, SplitSpec
from curate.output.tails import TailShard
from curate.stages.base import STATISTICS, BarrierStage, Stage, StageCounts
from curate.staging.record import PartitionRecord

if TYPE_CHECKING:
    from curate.engines.job import JobResult


def count_documents(
    stages: list[Stage], records: list[list[PartitionRecord]], tails: Sequence[TailShard] = ()
) -> Counts:
    """Documents read, removed and written (a packed document is written where its last
    token is: in a partition's shards or in a tail shard)."""
    first = records[0]
    quarantined = sum(r.quarantined for r in first)
    documents = sum(r.read for r in first)
    written = sum(
        s["documents"] if "documents" in s else s["rows"]
        for r in records[-1]
        for s in r.files.shards
    ) + sum(t.info.documents or 0 for t in tails)
    removed: dict[str, dict[str, int]] = {}
    for i, stage in enumerate(stages):
        total: Counter[str] = Counter()
        for pass_records in records:
            for r in pass_records:
                counts = r.stages.get(i)
                if counts is not None:
                    total.update(counts.removed)
        if total:
            removed[f"{i}:{stage.name}"] = dict(sorted(total.items()))
    forgotten = sum(r.forgotten for pass_records in records for r in pass_records)
    if forgotten:  # dropped where nothing ahead needs them (curate.excluded_rows)
        removed["forget"] = {"forgotten": forgotten}
    return Counts(
        read=documents + quarantined,
        documents=documents,
        written=written,
        removed=removed,
        removed_total=sum(sum(v.values()) for v in removed.values()),
        quarantined=quarantined,
        quarantined_bytes=sum(r.quarantined_bytes for r in first),
    )


def stage_records(
    stages: list[Stage], result: JobResult, names: Callable[[str], str] = str
) -> list[StageRecord]:
    software = stage_software(stages)
    caching = cache_records(stages, result, names)
    out = []
    for i, stage in enumerate(stages):
        total = StageCounts()
        for pass_records in result.records:
            for r in pass_records:
                c = r.stages.get(i)
                if c is not None:
                    total.add(c)
        details = dict(stage.describe())
        seconds = total.seconds
        if i in result.decisions:
            decision = dict(result.decisions[i])
            details.update(decision.pop("details", {}))
            details.pop(STATISTICS, None)  # the version's statistics.json holds those
            if "reused_from" in decision:  # a decision taken from the stage cache
                decision["reused_from"] = names(decision["reused_from"])
            details["decision"] = decision
            seconds += decision["seconds"]
            # sorted: a stage that decided has learned keys describe() lists first, one whose
            # decision came from the stage cache has not; the manifest must not tell them apart
            details = dict(sorted(details.items()))
        out.append(
            StageRecord(
                position=i,
                name=stage.name,
                kind="barrier" if isinstance(stage, BarrierStage) else "map",
                params=stage.params.model_dump(mode="json"),
                removed=dict(sorted(total.removed.items())),
                counters=dict(sorted(total.counters.items())),
                seconds=round(seconds, 4),
                software=software[i],
                details=details,
                docs_in=total.docs_in,
                docs_out=total.docs_out,
                changed=total.changed,
                cache=caching.get(i),
            )
        )
    return out


def cache_records(
    stages: list[Stage], result: JobResult, names: Callable[[str], str] = str
) -> dict[int, StageCacheRecord]:
    """Per stage position, how many partitions took its output from the stage cache and
    how many ran it (from the records of the pass that runs it; a barrier: its basis), and
    what the reused output cost to compute and to read back. `names` turns the fingerprint
    of a run that kept entries into the version it published."""
    reused: Counter[int] = Counter()
    ran: Counter[int] = Counter()
    runs: dict[int, set[str]] = {}
    computed: Counter[int] = Counter()
    read_seconds: Counter[int] = Counter()
    read_bytes: Counter[int] = Counter()
    docs: dict[int, Counter[str]] = {}  # a barrier's position -> documents computed, reused
    for k, pass_records in enumerate(result.records):
        positions = _pass_positions(stages, k)
        for r in pass_records:
            if r.cache is None:
                continue
            hit = [pos for pos in positions if pos in set(r.cache.get("reused", []))]
            for pos in positions:
                if pos in hit:
                    reused[pos] += 1
                    runs.setdefault(pos, set()).update(r.cache.get("from", []))
                    computed[pos] += r.cache.get("computed_seconds", {}).get(str(pos), 0.0)
                else:
                    ran[pos] += 1
            if hit:  # the pass read its entries back at once: counted at its last reused stage
                read_seconds[hit[-1]] += r.cache.get("read_seconds", 0.0)
                read_bytes[hit[-1]] += r.cache.get("read_bytes", 0)
            basis_docs = r.cache.get("basis_docs")
            if isinstance(basis_docs, dict) and positions:
                docs.setdefault(positions[-1], Counter()).update(basis_docs)
            by_document = r.cache.get("by_document")
            if isinstance(by_document, dict):  # every map stage of the pass, alike
                ran_on = by_document["computed"] + by_document["recounted"]
                for pos in positions:
                    if not isinstance(stages[pos], BarrierStage):
                        docs.setdefault(pos, Counter()).update(
                            {"computed": ran_on, "reused": by_document["reused"]}
                        )
    return {
        pos: StageCacheRecord(
            reused=reused[pos],
            ran=ran[pos],
            reused_from=[names(run) for run in sorted(runs.get(pos, set()))],
            computed_seconds=round(computed[pos], 4),
            read_seconds=round(read_seconds[pos], 4),
            read_bytes=read_bytes[pos],
            docs_computed=docs[pos]["computed"] if pos in docs else None,
            docs_reused=docs[pos]["reused"] if pos in docs else None,
        )
        for pos in sorted(set(reused) | set(ran))
    }


def _pass_positions(stages: list[Stage], k: int) -> list[int]:
    """The recipe positions pass k runs: its map stages and the barrier it summarizes for."""
    pass_index, out = 0, []
    for i, stage in enumerate(stages):
        if pass_index == k:
            out.append(i)
        if isinstance(stage, BarrierStage):
            pass_index += 1
    return out


def input_records(
    files: list[InputFile],
    hashes: list[str],
    partitions: list[Any],
    first_pass: list[PartitionRecord],
) -> list[InputRecord]:
    docs: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    parts: Counter[str] = Counter()
    for part, record in zip(partitions, first_pass, strict=True):
        docs[part.input.name] += record.read
        bad[part.input.name] += record.quarantined
        parts[part.input.name] += 1
    return [
        InputRecord(
            name=f.name,
            path=f.path,
            format=f.format,
            size=f.size,
            mtime_ns=f.mtime_ns,
            content_hash=digest,
            documents=docs[f.name],
            quarantined=bad[f.name],
            partitions=parts[f.name],
        )
        for f, digest in zip(files, hashes, strict=True)
    ]


def partition_entries(
    partitions: list[Partition], first_pass: list[PartitionRecord]
) -> list[PartitionEntry]:
    """Each partition's key, range and digest with what was read from it, in input order."""
    return [
        PartitionEntry(
            key=part.key,
            input=part.input.name,
            unit=part.unit,
            start=part.start,
            stop=part.stop,
            digest=record.digest or "",
            documents=record.read,
            quarantined=record.quarantined,
        )
        for part, record in zip(partitions, first_pass, strict=True)
    ]


def parents(files: list[InputFile]) -> list[str]:
    """Inputs that are themselves curate versions: `<dataset>/<version>@<fingerprint>`."""
    found = []
    for f in files:
        manifest = Path(f.path) / "manifest.json"
        if f.format == "hf_disk" and manifest.is_file():
            m = json.loads(manifest.read_text())
            found.append(f"{m['dataset']}/{m['version']}@{m['fingerprint']}")
    return found


def versions_read(files: list[InputFile]) -> list[Path]:
    """The curate versions a build reads: saved-dataset inputs that are a version's folder or
    one split of it (`v1/train`). The build holds their read locks, so gc leaves them."""
    found: list[Path] = []
    for f in files:
        if f.format == "hf_disk":
            folder = Path(f.path)
            for candidate in (folder, folder.parent):
                if (candidate / "manifest.json").is_file() and candidate not in found:
                    found.append(candidate)
                    break
    return found


def library_versions(stages: list[Stage]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for stage in stages:
        for key, value in stage.software().items():
            merged.setdefault(key, value)
    return merged


def total_tokens(shards: list[FileRecord]) -> int | None:
    """Total token ids written, when the shards hold tokens."""
    counted = [s.tokens for s in shards if s.tokens is not None]
    return sum(counted) if counted else None


def packing_record(
    spec: PackSpec | None, shards: list[FileRecord], tails: list[TailShard]
) -> Packing | None:
    """Where a packed version's tokens are: partitions write full rows only, so the short
    rows are the tail shards' last ones (the tokens `blocks()` skips; ragged conversation
    rows are all read)."""
    if spec is None:
        return None
    tokens = total_tokens(shards) or 0
    fixed = spec.kind == "tokens"
    lost = sum(t.short_tokens for t in tails) if fixed else 0
    return Packing(
        kind=spec.kind,
        seq_len=spec.seq_len,
        tokens=tokens,
        tokens_in_full_rows=tokens - lost if fixed else None,
        tail_tokens=sum(t.info.tokens or 0 for t in tails),
        tokens_lost=lost,
        lost_fraction=round(lost / tokens, 9) if tokens else 0.0,
        tail_shards=[t.info.path for t in tails],
    )


def split_records(spec: SplitSpec | None, shards: list[FileRecord]) -> Splits | None:
    """Per split: the documents, rows, tokens and shards written (sums over its shards)."""
    if spec is None:
        return None
    out = {}
    for name, fraction in spec.fractions().items():
        own = [s for s in shards if s.split == name]
        out[name] = SplitRecord(
            fraction=round(fraction, 12),
            documents=sum(s.documents if s.documents is not None else s.rows for s in own),
            rows=sum(s.rows for s in own),
            tokens=total_tokens(own),
            shards=len(own),
            bytes=sum(s.bytes for s in own),
        )
    method = (
        f"{HASH} of the id's UTF-8 bytes with the seed, divided by 2**64: below validation "
        "is validation, then test, the rest train"
    )
    return Splits(method=method, seed=spec.seed, splits=out)
