"""Publishing a mixture version: link the sources' shards, write the index, seal, rename.

```
<root>/<name>/vN/
  manifest.json                      `mixture`: sources, target vs achieved, the index
  index.arrow                        one row per sample, in mixture order: source, row
  sources/<label>/shards/...         each source's shards, hard-linked (same bytes, inode)
```
`row` counts the rows of the source's shards in the order its manifest lists them (of the
split drawn). The version is made in the store's staging folder under the fingerprint's
lock and published by the store's atomic rename, like any version (`curate.store`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import curate
from curate import mixture_refs
from curate.dirfd import Folder
from curate.manifest import Counts, FileRecord, Manifest, StageRecord
from curate.mix.links import link_shard
from curate.mix.schedule import Draw, check_prefixes, draw, interleave
from curate.mix.sources import Source
from curate.mix.spec import Mixture
from curate.mixture_record import MixtureIndex, MixtureRecord, MixtureSourceRecord
from curate.phases import mark
from curate.software import host, versions
from curate.staging.names import OUT
from curate.store import Store
from curate.version import Version

log = logging.getLogger(__name__)
INDEX = "index.arrow"
INDEX_SCHEMA = pa.schema([("source", pa.uint16()), ("row", pa.int64())])
INTERLEAVE = "earliest deadline first over each source's sample share (Tijdeman)"


def publish_mixture(
    mixture: Mixture, store: Store, fingerprint: str, sources: list[Source]
) -> Version:
    """Build and publish the mixture (call under the fingerprint's lock, none published)."""
    started, t0 = datetime.now(UTC), time.perf_counter()
    dir_mode, file_mode = int(mixture.output.dir_mode, 8), int(mixture.output.file_mode, 8)
    weights = np.array([s.spec.weight for s in sources], dtype=np.float64)
    shares = weights / weights.sum()
    # a budget the epoch caps cannot meet is refused here, before anything is written
    draws = []
    for k, s in enumerate(sources):
        target = float(mixture.budget * shares[k])
        draws.append(draw(s.row_tokens(), target, s.spec.max_epochs, mixture.seed, k, s.label))
    counts = [len(d.rows) for d in draws]
    order = interleave(counts)
    deviation = check_prefixes(order, counts)
    rows = np.empty(len(order), dtype=np.int64)
    for k, d in enumerate(draws):
        rows[order == k] = d.rows
    store.ensure()
    store.discard(store.staging_name(fingerprint))  # a crashed attempt: made again, quickly
    staging = store.open_staging(fingerprint)
    with staging:
        with staging.folder(OUT, dir_mode) as out:
            shards = _link_all(sources, out, (dir_mode, file_mode & ~0o222))
            index = _write_index(out, order, rows, file_mode, mixture.output.fsync)
        with store.publishing() as name:
            record = MixtureRecord(
                budget=mixture.budget,
                seed=mixture.seed,
                tokens=sum(d.tokens for d in draws),
                samples=len(order),
                interleave=INTERLEAVE,
                max_prefix_deviation=round(deviation, 6),
                sources=[_source_record(s, d, float(shares[k]), shards[k])
                         for k, (s, d) in enumerate(zip(sources, draws, strict=True))],
                index=index,
            )  # fmt: skip
            manifest = _manifest(mixture, name, fingerprint, sources, shards, record)
            manifest.timings = {"total": round(time.perf_counter() - t0, 4)}
            manifest.started = started.isoformat()
            with staging.folder(OUT) as out:
                out.write_atomic(
                    "manifest.json",
                    manifest.model_dump_json(indent=2, by_alias=True) + "\n",
                    file_mode,
                    fsync=mixture.output.fsync,
                )
            _refer(store.path / name, sources)
            path = store.publish(staging, name, fingerprint, fsync=mixture.output.fsync)
    store.discard(store.staging_name(fingerprint))
    log.info("published mixture %s", path)
    return Version(path).hold()


def _refer(mixture: Path, sources: list[Source]) -> None:
    """Tell each source's dataset folder that this mixture draws from it (`curate gc` keeps
    it); before the rename, while the build holds the sources' read locks, so no gc can
    collect a source in between. A folder that cannot take the entry is said, not fatal."""
    for s in sources:
        try:
            with Folder.open(s.version.path.parent) as dataset:
                mode = os.fstat(dataset.fd).st_mode & 0o777
                mixture_refs.record(dataset, mixture, s.version.name, s.version.fingerprint, mode)
        except OSError as exc:
            log.warning("%s: gc is not told this mixture draws from it: %s", s.version.path, exc)


def _link_all(sources: list[Source], out: Folder, modes: tuple[int, int]) -> list[list[FileRecord]]:
    linked = []
    for s in sources:
        own = []
        for record, path in s.shards:
            rel = path.relative_to(s.version.path).as_posix()
            target = f"sources/{s.label}/{rel}"
            link_shard(s.version.path, rel, record, out, target, modes)
            mark("mix_link")  # a crash test kills here: some shards linked, nothing visible
            fields = {k: record.get(k) for k in ("rows", "bytes", "sha256", "tokens", "documents")}
            own.append(FileRecord(path=target, **fields))
        linked.append(own)
    return linked


def _write_index(
    out: Folder, order: np.ndarray, rows: np.ndarray, mode: int, fsync: bool
) -> MixtureIndex:
    table = pa.table({"source": pa.array(order, pa.uint16()), "row": pa.array(rows, pa.int64())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, INDEX_SCHEMA) as writer:
        writer.write_table(table, max_chunksize=1 << 20)
    data = sink.getvalue().to_pybytes()
    fd = out.open_file(INDEX, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        mark("mix_index")  # and here: half the index on disk, in the staging folder
        f.write(data[len(data) // 2 :])
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    return MixtureIndex(
        path=INDEX, rows=len(order), bytes=len(data), sha256=hashlib.sha256(data).hexdigest()
    )


def _source_record(
    s: Source, d: Draw, share: float, shards: list[FileRecord]
) -> MixtureSourceRecord:
    v = s.version
    return MixtureSourceRecord(
        name=s.label,
        dataset=v.dataset,
        version=v.name,
        fingerprint=v.fingerprint,
        path=str(v.path),
        split=s.spec.split if v.splits else None,
        weight=share,
        max_epochs=s.spec.max_epochs,
        target_tokens=d.target,
        tokens=d.tokens,
        samples=len(d.rows),
        rows=d.eligible,
        epochs=round(d.epochs, 6),
        shards=[f.path for f in shards],
    )


def _manifest(
    mixture: Mixture,
    name: str,
    fingerprint: str,
    sources: list[Source],
    shards: list[list[FileRecord]],
    record: MixtureRecord,
) -> Manifest:
    first = sources[0]
    n = record.samples
    stage: dict[str, Any] = first.stage
    details = {k: v for k, v in (stage.get("details") or {}).items()
               if k in ("tokenizer", "pack", "chat_template")}  # fmt: skip
    return Manifest(
        dataset=mixture.name,
        version=name,
        fingerprint=fingerprint,
        parents=[str(s.version.path) for s in sources],
        recipe=mixture.resolved(),
        recipe_path=mixture.source,
        inputs=[],
        stages=[
            StageRecord(
                position=0,
                name="mix",
                kind="map",
                params={},
                docs_in=n,
                docs_out=n,
                changed=0,
                removed={},
                seconds=0.0,
                software=dict(stage.get("software") or {}),
                details=details,
            )
        ],
        schema_=first.schema(),
        shards=[f for own in shards for f in own],
        rejected=[],
        quarantine=[],
        counts=Counts(read=n, documents=n, written=n, removed={}, removed_total=0, quarantined=0),
        tokens=record.tokens,
        mixture=record,
        software=versions({"curate": curate.__version__}),
        host=host(),
        engine={"kind": "mix"},
        timings={},
        started="",
        finished=datetime.now(UTC).isoformat(),
    )
