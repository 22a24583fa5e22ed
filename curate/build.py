"""Building one version: check the disk, plan, run the engine, account, publish.

A `Build` is made by the run that owns it (`curate.recipe_run.RecipeRun`) once it holds
the fingerprint's lock and knows no published version matches. It owns the staging folder
for its duration; the version becomes visible only by the store's atomic publish at the
very end.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from curate import accounting, fork_setup, input_watch
from curate.cache.plan import CachePlan, cache_plan
from curate.cache.settings import decide_cache
from curate.cache.store import CacheSpec, StageCache
from curate.dirfd import Folder, write_atomic
from curate.engines.job import Job, JobResult, ProgressFn
from curate.engines.tasks import RunSettings
from curate.errors import CurateError
from curate.examples.files import write_examples
from curate.fingerprint import content_hash
from curate.forget.exclusions import Exclusions
from curate.hf_layout import DICT, write_layout
from curate.io.batches import FieldSpec
from curate.io.digest_cache import DigestCache
from curate.io.inputs import InputFile
from curate.io.partitions import Partition, plan_partitions
from curate.io.plan_cache import PlanCache
from curate.manifest import FileRecord, Manifest, StatisticsFile, reconcile
from curate.output.card import write_card
from curate.output.packing import packing_for
from curate.output.shard_merge import merged_shards
from curate.output.shards import write_table
from curate.output.tails import pack_tails
from curate.phases import mark
from curate.plan import Segment, check_columns, make_plan
from curate.quarantine_limits import check_run
from curate.recipe import Recipe
from curate.shared_files import share_unchanged
from curate.sizes import format_size
from curate.software import host, versions
from curate.stages.base import BarrierStage, Stage
from curate.staging.names import Staging, published_side_name, version_path
from curate.staging.record import PartitionRecord
from curate.stats import document as stats_document
from curate.store import Store
from curate.version import Version

if TYPE_CHECKING:
    from curate.engines.base import Engine

log = logging.getLogger(__name__)

# Arrow bytes per input byte, by format: compressed inputs expand when decoded.
_EXPANSION = {"jsonl.gz": 4.0, "jsonl.zst": 5.0, "parquet": 3.0}


def cache_needed(recipe: Recipe, files: list[InputFile]) -> int:
    """Bytes a run may add to the stage cache: per stage, its output rows and the rows it
    removed (about its input), plus one stage's worth for what stages add (token ids) and
    barriers' bases (hashes, signatures). An upper estimate: reused entries add nothing."""
    decoded = sum(f.size * _EXPANSION.get(f.format, 1.0) for f in files)
    return int(decoded * (len(recipe.stages) + 1) * 1.1)


def space_needed(
    recipe: Recipe, files: list[InputFile], store: Store, fp: str, *, cache: bool = False
) -> int:
    """Bytes a build may still need: staged data once per barrier plus the version itself,
    and with `cache` what it may add to the stage cache.

    An upper estimate (filters only shrink data); what a resumed run already staged counts
    as done.
    """
    decoded = sum(f.size * _EXPANSION.get(f.format, 1.0) for f in files)
    barriers = sum(1 for s in recipe.stages if issubclass(s.stage_class, BarrierStage))
    staging = store.staging(fp)
    done = (
        sum(p.stat().st_size for p in staging.rglob("*") if p.is_file()) if staging.exists() else 0
    )
    build = max(0, int(decoded * (barriers + 1) * 1.1) - done)
    return build + (cache_needed(recipe, files) if cache else 0)


def space_note(recipe: Recipe, files: list[InputFile], store: Store, fp: str) -> str:
    cached = recipe.output.cache.enabled
    need = format_size(space_needed(recipe, files, store, fp, cache=cached))
    free = format_size(shutil.disk_usage(store.path).free)
    counted = " (the stage cache's share included)" if cached else ""
    return (
        f"about {need} more is needed{counted}, {free} is free; free space (e.g. curate gc "
        f"{store.path} --keep 1 --cache) and run again: completed partitions are kept"
    )


def cache_for_run(
    recipe: Recipe, files: list[InputFile], store: Store, fp: str
) -> CacheSpec | None:
    """The stage cache this build uses: the recipe's, or None when it is off or would not
    fit in its budget or beside the build on the disk (a one-line notice, never a failure)."""
    if not recipe.output.cache.enabled:
        return None
    reserved = space_needed(recipe, files, store, fp) if recipe.output.check_space else 0
    return decide_cache(recipe, store, cache_needed(recipe, files), reserved=reserved)


@contextmanager
def _holding(plan: CachePlan | None) -> Iterator[None]:
    if plan is None:
        yield
        return
    with StageCache(plan.spec).using():
        yield


def _import_for_publishing() -> None:
    """Publishing imports polars (the lineage table): 0.15-0.2 s that stood after the last
    pass, on the run's wall time. When the passes run in other processes, the driver idles
    meanwhile: it imports it then, in a thread (after the fork: no worker inherits polars)."""
    import curate.lineage.publish  # noqa: F401


def _in_daemon_thread(fn: Callable[[], list[str]]) -> Future[list[str]]:
    """Hashing every input runs beside the first pass; an interrupted run must not wait at
    exit for it to read the rest of the inputs, as it would for a non-daemon thread."""
    future: Future[list[str]] = Future()

    def work() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=work, name="curate-hash", daemon=True).start()
    return future


@dataclass
class Build:
    recipe: Recipe
    files: list[InputFile]
    stages: list[Stage]
    fingerprint: str
    store: Store
    engine: Engine
    progress: ProgressFn
    known_hashes: list[str] | None = None
    excluded: tuple[str, ...] = ()  # ids `curate forget` removed (curate.excluded_rows)
    forgotten: Exclusions | None = None  # the dataset's exclusions, for the manifest
    excluded_lines: frozenset[tuple[str, int]] = frozenset()  # quarantined records unlisted
    staging_folder: Folder | None = field(default=None, init=False)  # held open while building
    nodes: list[dict[str, Any]] = field(default_factory=list, init=False)  # engine.placement
    examples_setup: threading.Thread | None = field(default=None, init=False)  # fork_setup

    def run(self) -> Version:
        """Everything this build creates (staging, shards, side outputs, worker files) gets
        the recipe's modes: the umask is process-wide, so it is set here and restored."""
        out = self.recipe.output
        umask = os.umask(0o777 & ~(int(out.dir_mode, 8) | int(out.file_mode, 8)))
        held: list[Version] = []  # versions read as inputs: gc must not delete them meanwhile
        try:
            for path in accounting.versions_read(self.files):
                held.append(Version(path).hold())
                held[-1].check_files()  # checked as a reader checks it: damage fails by name
            self._check_space()
            return self._run()
        finally:
            os.umask(umask)
            for version in held:
                version.release()
            if self.staging_folder is not None:
                self.staging_folder.close()

    def _exclusion_keys(self) -> list[object]:
        """What `curate forget` excludes from this build, as the fork's setup hint keys it."""
        return [sorted(self.excluded), sorted(self.excluded_lines)]

    def _check_space(self) -> None:
        if not self.recipe.output.check_space:
            return
        need = space_needed(self.recipe, self.files, self.store, self.fingerprint)
        free = shutil.disk_usage(self.store.path).free
        if need > free:
            raise CurateError(
                f"not enough space in {self.store.path}: this run needs about "
                f"{format_size(need)}, {format_size(free)} is free "
                "(set output.check_space: false to try anyway)"
            )

    def _run(self) -> Version:
        started, t0 = datetime.now(UTC), time.perf_counter()
        try:
            if getattr(self.engine, "forks", None) is None:  # Ray's: no fork waits on the plan,
                self.engine.start()  # so its workers boot while we plan
            job = self._job()  # planned first: whether the fork needs pii set up depends on it
            excluded = self._exclusion_keys()
            known = job.cache.digests if job.cache is not None else {}
            replayed = fork_setup.recorded(
                self.store, fork_setup.prefix_key(job, self.stages, excluded, known)
            )
            fork_setup.set_up_before_fork(self.engine, self.stages, replayed)
            self.examples_setup = fork_setup.set_up_for_examples(
                self.engine, self.stages, replayed, self.recipe.examples_per_reason()
            )
            self.engine.start()  # workers fork before any thread of ours exists
            if self.engine.runs_elsewhere():  # the driver idles while the passes run
                threading.Thread(target=_import_for_publishing, name="curate-prefetch",
                                 daemon=True).start()  # fmt: skip
            hashes = _in_daemon_thread(
                lambda: (
                    self.known_hashes
                    or [input_watch.hash_unchanged(f, content_hash) for f in self.files]
                )
            )
            log.info("building %s: %d partitions, fingerprint %s", self.recipe.name,
                     len(job.partitions), self.fingerprint[:12])  # fmt: skip
            t_setup = time.perf_counter()
            with _holding(job.cache):  # no other run's eviction removes an entry meanwhile
                result = self.engine.run(job, self.progress)
            if result.records:
                digests = fork_setup.digests_read(result.records[0])
                fork_setup.remember(
                    self.store, fork_setup.prefix_key(job, self.stages, excluded, digests)
                )
            timings = {
                "setup": round(t_setup - t0, 4),
                **result.timings,
                "engine": round(time.perf_counter() - t_setup, 4),
            }
            self.nodes = self.engine.placement(job)  # before publishing removes staging
            version = self._publish(job, result, hashes, started, t0, timings)
            if job.cache is not None:
                StageCache(job.cache.spec).evict()  # down to the budget, least recently used first
            return version
        except KeyboardInterrupt:  # while planning too: stop the workers, do not wait for them
            self.engine.terminate()
            raise
        finally:
            self.engine.close()

    def _partitions(self) -> list[Partition]:
        """The plan, with boundaries of plain JSONL planned by an earlier build taken from
        `.cache/plans.json` (`curate.io.plan_cache`), which is never a reason to fail."""
        try:
            known = self.store.read_own(".cache", "plans.json")
        except CurateError:  # a link where the cache should be: planned anew
            known = None
        cache = PlanCache(known)
        parts = plan_partitions(self.files, self.recipe.partition_size, cache)
        text = cache.text()
        if text is not None:
            try:
                self.store.save_own(".cache", "plans.json", text)
            except (OSError, CurateError) as exc:
                log.debug("plan cache not saved: %s", exc)
        return parts

    def _job(self) -> Job:
        r = self.recipe
        fields = FieldSpec(r.text_field, r.id_field, r.keep_fields(), chat=r.chat)
        segments = make_plan(self.stages)
        position = {id(s): i for i, s in enumerate(self.stages)}
        store, fp = self.store, self.fingerprint
        staging = Staging(store.staging(fp))
        self.staging_folder = store.open_staging(fp)  # made or found, held open: never a link
        discard = partial(store.discard, store.staging_name(fp))
        if input_watch.drop_stale_staging(staging, self.files, discard):  # read from old inputs
            self.staging_folder.close()
            self.staging_folder = store.open_staging(fp)
        return Job(
            cache=self._cache_plan(segments),
            staging=staging,
            segments=segments,
            positions=[[position[id(m)] for m in seg.maps] for seg in segments],
            barrier_positions=[position[id(s.barrier)] if s.barrier else -1 for s in segments],
            partitions=self._partitions(),
            settings=RunSettings(
                fields=fields,
                on_error=r.on_error_policy.mode,
                final_schema=check_columns(self.stages, fields.schema()),
                shard_bytes=r.output.shard_size,
                fsync=r.output.fsync,
                file_mode=int(r.output.file_mode, 8),
                write_rejected=r.output.rejected,
                batch_bytes=r.batch_size,
                max_document_bytes=r.max_document_bytes,
                packing=packing_for(self.stages),
                split=r.split,
                stop_early=r.on_error_policy.mode == "quarantine" and r.on_error_policy.stop_early,
                excluded=self.excluded,
                excluded_lines=self.excluded_lines,
            ),
        )

    def _version_of(self, fingerprint: str) -> str:
        """The version a run published (for "reused from v3"), or its fingerprint's start."""
        try:
            name = self.store.indexed(fingerprint)
        except (CurateError, OSError, ValueError):
            name = None
        return name if name and re.fullmatch(r"v\d+", name) else fingerprint[:16]

    def _cache_plan(self, segments: list[Segment]) -> CachePlan | None:
        """The stage cache's keys for this build, when the recipe keeps a cache."""
        spec = cache_for_run(self.recipe, self.files, self.store, self.fingerprint)
        if spec is None:
            return None
        plan = cache_plan(spec, segments, self.recipe.resolved(), self.fingerprint)
        try:  # digests an earlier build took of unchanged files: pass 0 need not hash them
            known = DigestCache(self.store.read_own(".cache", "digests.json"))
        except CurateError:
            return plan
        for f in self.files:
            plan.digests.update(known.digests(f, self.recipe.partition_size) or {})
        return plan

    def _publish(
        self,
        job: Job,
        result: JobResult,
        hashes: Future[list[str]],
        started: datetime,
        t0: float,
        timings: dict[str, float],
    ) -> Version:
        r, stages = self.recipe, self.stages
        out = job.staging.out
        final = merged_shards(
            job.staging.root,
            [(rec.partition, rec.files.shards) for rec in result.records[-1]],  # by key
            r.output.shard_size,
            fsync=r.output.fsync,
            file_mode=int(r.output.file_mode, 8),
        )
        shards = [FileRecord(**(s | {"path": version_path(s["path"])})) for s in final]
        split_names = r.split.names() if r.split is not None else [None]
        packing = job.settings.packing
        tails = []
        if packing is not None:  # every partition's short last row, packed in partition order
            staged = _staged_tails(result.records[-1], job.staging)
            mode = int(r.output.file_mode, 8)
            tails = pack_tails(packing, staged, out, split_names, fsync=r.output.fsync,
                               file_mode=mode)  # fmt: skip
            shards += [FileRecord(**t.info.to_dict()) for t in tails]
        # every document removed: one empty shard (per split) keeps the version readable
        for name in split_names:
            if not any(s.split == name for s in shards):
                shards.append(_empty_shard(out, job.settings.final_schema, name))
        lineage = _lineage(self.files, job.partitions, result.records[-1], job.staging, shards, r)
        side = _collect_side_outputs(result.records, job.staging, r)
        t_examples = time.perf_counter()
        if self.examples_setup is not None:
            self.examples_setup.join()
        examples = write_examples(
            job.staging, result.records, job.partitions, [seg.barrier for seg in job.segments],
            stages, r.examples_per_reason(), out, fsync=r.output.fsync,
            file_mode=int(r.output.file_mode, 8),
            cache=job.cache.spec if job.cache is not None else None, excluded=self.excluded,
        )  # fmt: skip
        timings = {**timings, "examples": round(time.perf_counter() - t_examples, 4)}
        counts = accounting.count_documents(stages, result.records, tails)
        reconcile(counts)
        mark("publish")
        digests = hashes.result()
        input_watch.check_records(self.files, result.records[0])
        input_watch.check_all(self.files)  # nothing changed since it was read
        check_run(result.records[0], r.on_error_policy)  # (a changed input is the first cause)
        with self.store.publishing() as version:
            statistics = self._statistics(job, result)
            manifest = Manifest(
                dataset=r.name,
                version=version,
                fingerprint=self.fingerprint,
                parents=accounting.parents(self.files),
                recipe=r.resolved(),
                recipe_path=r.source,
                inputs=accounting.input_records(
                    self.files, digests, job.partitions, result.records[0]
                ),
                partitions=accounting.partition_entries(job.partitions, result.records[0]),
                stages=accounting.stage_records(stages, result, self._version_of),
                schema_=[{"name": f.name, "type": str(f.type)} for f in job.settings.final_schema],
                shards=shards,
                rejected=side["rejected"],
                quarantine=side["quarantine"],
                examples=[FileRecord(**e) for e in examples],
                lineage=lineage,
                forgotten=self._forgotten(result),
                statistics=statistics,
                counts=counts,
                tokens=accounting.total_tokens(shards),
                splits=accounting.split_records(r.split, shards),
                layout=DICT,
                packing=accounting.packing_record(packing, shards, tails),
                software=versions(accounting.library_versions(stages)),
                host=host(),
                engine={
                    "kind": self.engine.kind,
                    "workers": self.engine.workers,
                    **({"nodes": self.nodes} if self.nodes else {}),
                },
                timings={**timings, "total": round(time.perf_counter() - t0, 4)},
                started=started.isoformat(),
                finished=datetime.now(UTC).isoformat(),
            )
            names = r.split.names() if r.split is not None else []
            write_layout(out, [(s.path, s.split) for s in shards], names, DICT, self.fingerprint)
            manifest.card = write_card(out, manifest, mode=int(r.output.file_mode, 8),
                                       fsync=r.output.fsync)  # fmt: skip
            assert self.staging_folder is not None
            share_unchanged(
                self.store, self.staging_folder,
                [*shards, *side["rejected"], *side["quarantine"], *lineage],
            )  # fmt: skip
            write_atomic(
                out / "manifest.json",
                manifest.model_dump_json(indent=2, by_alias=True) + "\n",
                mode=int(r.output.file_mode, 8),
                fsync=r.output.fsync,
            )
            path = self.store.publish(
                self.staging_folder, version, self.fingerprint, fsync=r.output.fsync
            )
        self.store.discard(self.store.staging_name(self.fingerprint))
        log.info("published %s", path)
        return Version(path).hold()

    def _forgotten(self, result: JobResult) -> dict[str, object] | None:
        if not self.forgotten:
            return None
        dropped = sum(rec.forgotten for rs in result.records for rec in rs)
        return self.forgotten.record(dropped, sum(rec.unlisted for rec in result.records[0]))

    def _statistics(self, job: Job, result: JobResult) -> StatisticsFile | None:
        """Write the version's statistics.json (unless the recipe turned them off)."""
        r = self.recipe
        if not r.output.stats:
            return None
        kinds = [(s.name, "barrier" if isinstance(s, BarrierStage) else "map") for s in self.stages]
        document = stats_document.statistics(
            kinds, result.records, [f.name for f in self.files], result.decisions
        )
        text = stats_document.dumps(document)
        path = job.staging.out / stats_document.NAME
        write_atomic(path, text, mode=int(r.output.file_mode, 8), fsync=r.output.fsync)
        data = text.encode()
        return StatisticsFile(
            path=stats_document.NAME,
            bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            format_version=stats_document.FORMAT_VERSION,
        )


def _empty_shard(out: Path, schema: pa.Schema, split: str | None = None) -> FileRecord:
    folder = out / split / "shards" if split else out / "shards"
    folder.mkdir(parents=True, exist_ok=True)
    info = write_table(folder / "part-empty-00000.arrow", schema.empty_table(), relative_to=out)
    return FileRecord(**info.to_dict(), split=split)


def _lineage(
    files: list[InputFile],
    partitions: list[Partition],
    records: list[PartitionRecord],
    staging: Staging,
    shards: list[FileRecord],
    recipe: Recipe,
) -> list[FileRecord]:
    """The version's lineage side table (`curate.lineage`), from what the final pass staged."""
    from curate.lineage.publish import staged_tables, write_lineage

    inputs = {f.name: i for i, f in enumerate(files)}
    by_key = {p.key: p for p in partitions}
    parts = [(rec.input, rec.files.lineage, _lines_before(by_key.get(rec.partition)))
             for rec in records]  # fmt: skip
    sources = partial(staged_tables, parts, inputs, staging.resolve)
    out = recipe.output
    return write_lineage(staging.out, sources, shards, fsync=out.fsync,
                         file_mode=int(out.file_mode, 8))  # fmt: skip


def _lines_before(part: Partition | None) -> int:
    """Lines of a plain JSONL file before a partition that starts inside it (counted once per
    file in all, partitions coming in order: `curate.io.line_numbers` remembers)."""
    if part is None or part.input.format != "jsonl" or part.start == 0:
        return 0
    from curate.io.line_numbers import lines_before

    return lines_before(part)


def _staged_tails(
    records: list[PartitionRecord], staging: Staging
) -> list[tuple[str | None, Path]]:
    """The tail files the final pass staged, `(split, path)` in partition order."""
    staged = []
    for record in records:
        for info in record.files.tails:
            path = staging.resolve(info["path"])
            if path is None:  # a completed record names files of the staging folder only
                raise CurateError(f"{staging.root}: a record names {info['path']!r}, outside it")
            staged.append((info.get("split"), path))
    return staged


def _collect_side_outputs(
    records: list[list[PartitionRecord]],
    staging: Staging,
    recipe: Recipe,
) -> dict[str, list[FileRecord]]:
    """Move each pass's rejected and quarantine files into the version, in a stable order:
    pass by pass, partitions in input order, small ones merged in key-fixed groups as
    shards are (a run of thousands of partitions would otherwise leave as many files)."""
    out = recipe.output
    side: dict[str, list[FileRecord]] = {"rejected": [], "quarantine": []}
    for k, pass_records in enumerate(records):
        for kind in ("rejected", "quarantine"):
            if kind == "rejected" and not out.rejected:
                continue
            files = merged_shards(
                staging.root,
                [(rec.partition, getattr(rec.files, kind)) for rec in pass_records],  # by key
                out.shard_size,
                fsync=out.fsync,
                file_mode=int(out.file_mode, 8),
                prefix=f"{kind}-group",
                record=f"merges-pass{k}-{kind}.json",
            )
            for info in files:
                name = published_side_name(k, info["path"])
                target = staging.out / kind / name
                target.parent.mkdir(exist_ok=True)
                os.replace(staging.root / info["path"], target)
                side[kind].append(FileRecord(**(info | {"path": f"{kind}/{name}"})))
    return side
