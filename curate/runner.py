"""Running a recipe: fingerprint, find or build, account, publish.

`run` and `prepare` mean the same thing: return the published version for the
recipe's current fingerprint, building it only when needed. The no-op path stats the
inputs and reads one small index file; it imports no stage library and reads no data.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from curate.engines.job import Job, ProgressFn, no_progress
from curate.engines.tasks import DiskFull
from curate.errors import CurateError
from curate.fingerprint import cached_content_hashes, content_hash, fingerprint, stage_software
from curate.io.batches import FieldSpec
from curate.io.hf_layout import write_hf_files
from curate.io.inputs import InputFile, discover_inputs
from curate.io.packing import packing_for
from curate.io.partitions import plan_partitions
from curate.manifest import Counts, FileRecord, InputRecord, Manifest, StageRecord, reconcile
from curate.phases import mark
from curate.plan import check_columns, make_plan
from curate.recipe import Recipe
from curate.sizes import format_size
from curate.software import host, versions
from curate.stages.base import BarrierStage, Stage, StageContext
from curate.store import Store, write_atomic
from curate.version import Version

log = logging.getLogger(__name__)


def _load(recipe: Recipe | str | os.PathLike[str]) -> Recipe:
    return recipe if isinstance(recipe, Recipe) else Recipe.load(Path(recipe))


def build_stages(recipe: Recipe) -> list[Stage]:
    context = StageContext
    return [
        spec.stage_class(
            spec.params,
            context(text_field=recipe.text_field, position=i, base_dir=str(recipe.base_dir)),
        )
        for i, spec in enumerate(recipe.stages)
    ]


def run(
    recipe: Recipe | str | os.PathLike[str],
    *,
    progress: ProgressFn = no_progress,
    workers: int | None = None,
) -> Version:
    """The version for this recipe and these inputs: found if published, else built now."""
    recipe = _load(recipe)
    files = discover_inputs(recipe.inputs, recipe.base_dir, check=False)
    stages = build_stages(recipe)
    store = Store(
        recipe.output_root(),
        recipe.name,
        dir_mode=int(recipe.output.dir_mode, 8),
        file_mode=int(recipe.output.file_mode, 8),
    )
    hashes = None
    if recipe.input_identity == "content":
        hashes = cached_content_hashes(store.path / ".cache" / "input-hashes.json", files)
    fp = fingerprint(recipe, files, stages, hashes)
    found = store.find(fp)
    if found is not None:
        store.repair_latest()
        store.drop_leftover_staging(fp)
        return Version(found, up_to_date=True).hold()
    # Building: check every input's contents before anything is written.
    files = discover_inputs(recipe.inputs, recipe.base_dir)
    fp = fingerprint(recipe, files, stages, hashes)
    store.ensure()
    with store.lock(fp):
        found = store.find(fp)  # another process may have built it while we waited
        if found is not None:
            return Version(found, up_to_date=True).hold()
        store.clean_stale(fp)
        try:
            return _build(recipe, files, stages, fp, store, progress, workers, hashes)
        except DiskFull as exc:
            raise DiskFull(f"{exc}; {_space_note(recipe, files, store, fp)}") from None
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            raise DiskFull(
                f"disk full while writing {store.path}; {_space_note(recipe, files, store, fp)}"
            ) from None
        except CurateError:
            # A user error (bad record with on_error: fail, a full disk) is fixed by changing
            # inputs or settings, which changes the fingerprint: this staging is of no more use.
            # A crash or an interrupt keeps it, so the next run resumes its completed partitions.
            shutil.rmtree(store.staging(fp), ignore_errors=True)
            raise


prepare = run


def _engine(recipe: Recipe, workers: int | None) -> Any:
    spec = recipe.engine
    if spec.kind == "ray":
        try:
            import ray  # noqa: F401  (only here: importing curate never imports Ray)
        except ImportError:
            raise CurateError("engine 'ray' needs Ray: pip install 'curate[ray]'") from None
        from curate.engines.ray import RayEngine

        return RayEngine(address=spec.address, workers=workers or spec.workers)
    from curate.engines.local import LocalEngine

    return LocalEngine(workers or spec.workers or os.cpu_count() or 1)


def _build(
    recipe: Recipe,
    files: list[InputFile],
    stages: list[Stage],
    fp: str,
    store: Store,
    progress: ProgressFn,
    workers: int | None,
    known_hashes: list[str] | None = None,
) -> Version:
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    # Everything this build creates (staging, shards, side outputs, worker files) gets the
    # recipe's modes: the umask is process-wide, so it is set for the build and restored.
    umask = os.umask(0o777 & ~(int(recipe.output.dir_mode, 8) | int(recipe.output.file_mode, 8)))
    try:
        return _build_checked(recipe, files, stages, fp, store, progress, workers, known_hashes,
                              started, t0)  # fmt: skip
    finally:
        os.umask(umask)


def _build_checked(
    recipe: Recipe,
    files: list[InputFile],
    stages: list[Stage],
    fp: str,
    store: Store,
    progress: ProgressFn,
    workers: int | None,
    known_hashes: list[str] | None,
    started: datetime,
    t0: float,
) -> Version:
    if recipe.output.check_space:
        need, free = space_needed(recipe, files, store, fp), shutil.disk_usage(store.path).free
        if need > free:
            raise CurateError(
                f"not enough space in {store.path}: this run needs about {format_size(need)}, "
                f"{format_size(free)} is free (set output.check_space: false to try anyway)"
            )
    engine = _engine(recipe, workers)
    engine.start()  # workers boot while we plan
    hashing = ThreadPoolExecutor(1, thread_name_prefix="curate-hash")
    hashes = hashing.submit(lambda: known_hashes or [content_hash(Path(f.path)) for f in files])
    try:
        return _build_with(recipe, files, stages, fp, store, progress, engine, hashes, started, t0)
    finally:
        engine.close()
        hashing.shutdown(cancel_futures=True)


def _build_with(
    recipe: Recipe,
    files: list[InputFile],
    stages: list[Stage],
    fp: str,
    store: Store,
    progress: ProgressFn,
    engine: Any,
    hashes: Future[list[str]],
    started: datetime,
    t0: float,
) -> Version:
    fields = FieldSpec(recipe.text_field, recipe.id_field, recipe.keep_fields())
    final_schema = check_columns(stages, fields.schema())
    segments = make_plan(stages)
    partitions = plan_partitions(files, recipe.partition_size)
    position = {id(s): i for i, s in enumerate(stages)}
    staging = store.staging(fp)
    staging.mkdir(exist_ok=True)
    job = Job(
        staging=staging,
        segments=segments,
        positions=[[position[id(m)] for m in seg.maps] for seg in segments],
        barrier_positions=[position[id(seg.barrier)] if seg.barrier else -1 for seg in segments],
        partitions=partitions,
        fields=fields,
        on_error=recipe.on_error,
        final_schema=final_schema,
        shard_bytes=recipe.output.shard_size,
        fsync=recipe.output.fsync,
        file_mode=int(recipe.output.file_mode, 8),
        write_rejected=recipe.output.rejected,
        batch_bytes=recipe.batch_size,
        packing=packing_for(stages),
    )
    log.info("building %s (%d partitions, fingerprint %s)", recipe.name, len(partitions), fp[:12])
    t_setup = time.perf_counter()
    result = engine.run(job, progress)
    t_engine = time.perf_counter()

    out = staging / "out"
    (out / "shards").mkdir(parents=True, exist_ok=True)
    final_records = result.records[-1]
    shards = [FileRecord(**s) for r in final_records for s in r["files"].get("shards", [])]
    shards = [s.model_copy(update={"path": _strip(s.path, "out/")}) for s in shards]
    if not shards:  # every document removed: one empty shard keeps the version readable
        shards = [_empty_shard(out, final_schema)]
    side = _collect_side_outputs(result.records, staging, out, recipe.output.rejected)
    counts = _counts(stages, result.records)
    reconcile(counts)
    mark("publish")
    with store.publishing() as version:
        manifest = Manifest(
            dataset=recipe.name,
            version=version,
            fingerprint=fp,
            parents=_parents(files),
            recipe=recipe.resolved(),
            recipe_path=recipe.source,
            inputs=_input_records(files, hashes.result(), partitions, result.records[0]),
            stages=_stage_records(stages, result),
            schema_=[{"name": f.name, "type": str(f.type)} for f in final_schema],
            shards=shards,
            rejected=side["rejected"],
            quarantine=side["quarantine"],
            counts=counts,
            tokens=_tokens(shards),
            software=versions(_library_versions(stages)),
            host=host(),
            engine={"kind": engine.kind, "workers": getattr(engine, "workers", None)},
            timings={
                "setup": round(t_setup - t0, 4),
                **result.timings,
                "engine": round(t_engine - t_setup, 4),
                "total": round(time.perf_counter() - t0, 4),
            },
            started=started.isoformat(),
            finished=datetime.now(UTC).isoformat(),
        )
        write_hf_files(out, [s.path for s in shards], fp)
        write_atomic(
            out / "manifest.json",
            manifest.model_dump_json(indent=2, by_alias=True) + "\n",
            mode=int(recipe.output.file_mode, 8),
            fsync=recipe.output.fsync,
        )
        path = store.publish(out, version, fp, fsync=recipe.output.fsync)
    shutil.rmtree(staging, ignore_errors=True)
    log.info("published %s", path)
    return Version(path).hold()


def _tokens(shards: list[FileRecord]) -> int | None:
    """Total token ids written, when the shards hold tokens."""
    counted = [s.tokens for s in shards if s.tokens is not None]
    return sum(counted) if counted else None


# Arrow bytes per input byte, by format: compressed inputs expand when decoded.
_EXPANSION = {"jsonl.gz": 4.0, "jsonl.zst": 5.0, "parquet": 3.0}


def space_needed(recipe: Recipe, files: list[InputFile], store: Store, fp: str) -> int:
    """Bytes a build may still need: staged data once per barrier plus the version itself.

    An upper estimate (filters only shrink data); what a resumed run already staged counts
    as done.
    """
    decoded = sum(f.size * _EXPANSION.get(f.format, 1.0) for f in files)
    barriers = sum(1 for s in recipe.stages if hasattr(s.stage_class, "decide"))
    staging = store.staging(fp)
    done = (
        sum(p.stat().st_size for p in staging.rglob("*") if p.is_file()) if staging.exists() else 0
    )
    return max(0, int(decoded * (barriers + 1) * 1.1) - done)


def _space_note(recipe: Recipe, files: list[InputFile], store: Store, fp: str) -> str:
    need = format_size(space_needed(recipe, files, store, fp))
    free = format_size(shutil.disk_usage(store.path).free)
    return (
        f"about {need} more is needed, {free} is free; free space (e.g. curate gc "
        f"{store.root} --keep 1) and run again: completed partitions are kept"
    )


def _strip(path: str, prefix: str) -> str:
    return path[len(prefix) :] if path.startswith(prefix) else path


def _empty_shard(out: Path, schema: Any) -> FileRecord:
    from curate.io.shards import write_table

    info = write_table(
        out / "shards" / "part-00000-00000.arrow", schema.empty_table(), relative_to=out
    )
    return FileRecord(**info.to_dict())


def _collect_side_outputs(
    records: list[list[dict[str, Any]]], staging: Path, out: Path, rejected: bool
) -> dict[str, list[FileRecord]]:
    """Move each pass's rejected and quarantine files into the version, in a stable order."""
    side: dict[str, list[FileRecord]] = {"rejected": [], "quarantine": []}
    for k, pass_records in enumerate(records):
        for record in pass_records:
            for key in ("rejected", "quarantine"):
                if key == "rejected" and not rejected:
                    continue
                for info in record["files"][key]:
                    name = f"pass{k}-{Path(info['path']).name.split('-', 1)[1]}"
                    target = out / key / name
                    target.parent.mkdir(exist_ok=True)
                    os.replace(staging / info["path"], target)
                    side[key].append(FileRecord(**(info | {"path": f"{key}/{name}"})))
    return side


def _counts(stages: list[Stage], records: list[list[dict[str, Any]]]) -> Counts:
    first = records[0]
    quarantined = sum(r["quarantined"] for r in first)
    documents = sum(r["read"] for r in first)
    written = sum(
        s.get("documents", s["rows"]) for r in records[-1] for s in r["files"].get("shards", [])
    )
    removed: dict[str, dict[str, int]] = {}
    for i, stage in enumerate(stages):
        total: Counter[str] = Counter()
        for pass_records in records:
            for r in pass_records:
                total.update(r["stages"].get(str(i), {}).get("removed", {}))
        if total:
            removed[f"{i}:{stage.name}"] = dict(sorted(total.items()))
    return Counts(
        read=documents + quarantined,
        documents=documents,
        written=written,
        removed=removed,
        removed_total=sum(sum(v.values()) for v in removed.values()),
        quarantined=quarantined,
        quarantined_bytes=sum(r.get("quarantined_bytes", 0) for r in first),
    )


def _stage_records(stages: list[Stage], result: Any) -> list[StageRecord]:
    software = stage_software(stages)
    out = []
    for i, stage in enumerate(stages):
        agg: dict[str, Any] = {"docs_in": 0, "docs_out": 0, "changed": 0, "seconds": 0.0}
        removed: Counter[str] = Counter()
        counters: Counter[str] = Counter()
        for pass_records in result.records:
            for r in pass_records:
                c = r["stages"].get(str(i))
                if c is None:
                    continue
                for key in agg:
                    agg[key] += c[key]
                removed.update(c["removed"])
                counters.update(c.get("counters", {}))
        details = dict(stage.describe())
        seconds = agg.pop("seconds")
        if i in result.decisions:
            details["decision"] = result.decisions[i]
            seconds += result.decisions[i]["seconds"]
        out.append(
            StageRecord(
                position=i,
                name=stage.name,
                kind="barrier" if isinstance(stage, BarrierStage) else "map",
                params=stage.params.model_dump(mode="json"),
                removed=dict(sorted(removed.items())),
                counters=dict(sorted(counters.items())),
                seconds=round(seconds, 4),
                software=software[i],
                details=details,
                **agg,
            )
        )
    return out


def _input_records(
    files: list[InputFile],
    hashes: list[str],
    partitions: list[Any],
    first_pass: list[dict[str, Any]],
) -> list[InputRecord]:
    docs: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    parts: Counter[str] = Counter()
    for part, record in zip(partitions, first_pass, strict=True):
        docs[part.input.name] += record["read"]
        bad[part.input.name] += record["quarantined"]
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


def _parents(files: list[InputFile]) -> list[str]:
    """Inputs that are themselves curate versions: `<dataset>/<version>@<fingerprint>`."""
    import json

    parents = []
    for f in files:
        manifest = Path(f.path) / "manifest.json"
        if f.format == "hf_disk" and manifest.is_file():
            m = json.loads(manifest.read_text())
            parents.append(f"{m['dataset']}/{m['version']}@{m['fingerprint']}")
    return parents


def _library_versions(stages: list[Stage]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for stage in stages:
        for key, value in stage.software().items():
            merged.setdefault(key, value)
    return merged
