"""What benchmarks/stage_cache.py checks and derives from the versions it builds.

- `compare_versions`: a version a cached rerun published against the same recipe built
  from scratch (cache off, a fresh root), every file byte for byte; manifests as JSON
  without the keys that say when, where and how a version was built, never what it holds
  (`NOT_DATA`, on top of benchmarks/identity.py's VOLATILE_MANIFEST_KEYS).
- `materialize`: a version's shards (the post-PII text) as one Arrow IPC file, the input of
  the tokenize-only recipe the tokenizer-change rerun is measured against.
- `cache_usage`, `signatures_computed`, `stage_outcomes`: what a run left in the cache and
  says about it, read from disk and the manifest.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path
from typing import Any

from benchmarks.identity import (
    PID_FILES,
    VOLATILE_MANIFEST_KEYS,
    _matches,
    describe_bytes,
    files_under,
    json_diff,
)

NOT_DATA: dict[str, str] = {
    "version": "the version's name: v2 in a root with history, v1 in a fresh one",
    "recipe_path": "where the recipe file was; each build has its own folder",
    "recipe.output.cache": "cache on (the default, absent) against the reference's false",
    "inputs.*.mtime_ns": "touched inputs: same bytes, a newer mtime",
    "card.sha256": "the dataset card (README.md) names its version",
    "card.bytes": "the dataset card names its version (v10 is a byte longer than v9)",
}
"""Manifest keys, beyond VOLATILE_MANIFEST_KEYS, that differ between a cached rerun and a
build from scratch of the same recipe without the data differing (dotted, * any key)."""

CACHE_WORDS = ("cache", "reuse")
"""Any manifest key whose name holds one of these says how the cache served the run
(ran or reused, hits, bytes): dropped too, and reported by stage_outcomes."""

FINGERPRINT_KEYS = {"fingerprint": "a stat-identity fingerprint moves when an input is touched"}
"""Dropped only when a touched input made curate build the same recipe again; the
fingerprint is also written into state.json and dataset_info.json (whole and its first 16
hex digits), where the rerun's is replaced by the reference's before comparing."""


def compare_versions(rerun: Path, scratch: Path, touched: bool = False) -> list[str]:
    """How the version folder `rerun` differs from `scratch`: one line per difference."""
    left, right = files_under(rerun), files_under(scratch)
    swap: list[tuple[bytes, bytes]] = []
    if touched:
        ours, theirs = (_fingerprint(v) for v in (rerun, scratch))
        swap = [(ours.encode(), theirs.encode()), (ours[:16].encode(), theirs[:16].encode())]
    problems = [f"{name}: only in the rerun" for name in sorted(left.keys() - right.keys())]
    problems += [f"{name}: only from scratch" for name in sorted(right.keys() - left.keys())]
    for name in sorted(left.keys() & right.keys()):
        a, b = left[name], right[name]
        if any(fnmatch.fnmatchcase(a.name, p) for p in PID_FILES):
            continue
        if a.is_symlink() or b.is_symlink():
            if not (a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)):
                problems.append(f"{name}: symbolic links differ")
            continue
        x, y = a.read_bytes(), b.read_bytes()
        if a.name == "manifest.json":
            diffs: list[str] = []
            json_diff(
                manifest_data(json.loads(x), touched), manifest_data(json.loads(y), touched),
                "", diffs,
            )  # fmt: skip
            problems += [f"{name}: {d}" for d in diffs]
            continue
        for old, new in swap + (_names(rerun, scratch) if a.name == "README.md" else []):
            x = x.replace(old, new)
        if x != y:
            problems.append(f"{name}: {describe_bytes(x, y)}")
    return problems


def _names(rerun: Path, scratch: Path) -> list[tuple[bytes, bytes]]:
    """The dataset card names its version ("pretrain v2", "pretrain/v2"): the rerun's name
    put in place of the reference's, as the manifest's `version` is dropped."""
    (dataset, ours), theirs = (_named(rerun), _named(scratch)[1])
    return [(f"{dataset}{sep}{ours}".encode(), f"{dataset}{sep}{theirs}".encode())
            for sep in (" ", "/")]  # fmt: skip


def _named(version: Path) -> tuple[str, str]:
    manifest = json.loads((version / "manifest.json").read_text())
    return str(manifest["dataset"]), str(manifest["version"])


def _fingerprint(version: Path) -> str:
    return str(json.loads((version / "manifest.json").read_text())["fingerprint"])


def manifest_data(manifest: dict[str, Any], touched: bool) -> Any:
    """The manifest without the keys that do not describe the data (a copy)."""
    keys = {**VOLATILE_MANIFEST_KEYS, **NOT_DATA, **(FINGERPRINT_KEYS if touched else {})}
    patterns = [key.split(".") for key in keys]

    def strip(value: Any, path: list[str]) -> Any:
        if isinstance(value, dict):
            return {
                k: strip(v, [*path, k])
                for k, v in value.items()
                if not any(_matches(p, [*path, k]) for p in patterns)
                and not any(word in k.lower() for word in CACHE_WORDS)
            }
        if isinstance(value, list):
            return [strip(v, [*path, "*"]) for v in value]
        return value

    return strip(manifest, [])


def materialize(version: Path, out: Path, batch_bytes: int = 1 << 20) -> int:
    """Write the rows of `version`'s shards, in the manifest's order, into one Arrow IPC
    file of record batches of about batch_bytes (so partitions can split it); rows."""
    import pyarrow as pa

    manifest = json.loads((version / "manifest.json").read_text())
    tables = []
    for shard in manifest["shards"]:
        with pa.memory_map(str(version / shard["path"])) as source:
            tables.append(pa.ipc.open_stream(source).read_all())
    table = pa.concat_tables(tables).combine_chunks()
    rows_per_batch = max(1, batch_bytes * table.num_rows // max(1, table.nbytes))
    tmp = out.with_name(out.name + ".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=rows_per_batch):
            writer.write_batch(batch)
    tmp.replace(out)
    return table.num_rows


def cache_usage(folder: Path) -> tuple[int, int]:
    """(apparent bytes, bytes allocated on disk) of every file under folder; (0, 0) when
    there is no such folder (no cache on today's main)."""
    apparent = allocated = 0
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return apparent, allocated


def signatures_computed(manifest: dict[str, Any]) -> int | None:
    """MinHash signatures the run computed, if the manifest counts them: a counter or
    detail of the minhash_dedup stage whose name holds 'signatures_computed' (or
    'signatures' and 'computed'); None when it does not (today's main)."""
    for stage in manifest.get("stages", []):
        if stage.get("name") != "minhash_dedup":
            continue
        for where in (stage.get("counters", {}), stage.get("details", {})):
            found = _find_counter(where)
            if found is not None:
                return found
    return None


def minhash_basis(manifest: dict[str, Any]) -> tuple[int, int] | None:
    """(partitions whose MinHash summary basis, the signatures, was computed, partitions
    whose basis was read from the cache), from the minhash_dedup stage record's cache
    entry ({ran, reused}); None when the manifest has none (no cache, or cache off)."""
    for stage in manifest.get("stages", []):
        said = stage.get("cache") if stage.get("name") == "minhash_dedup" else None
        if isinstance(said, dict) and isinstance(said.get("ran"), int):
            return said["ran"], int(said.get("reused", 0))
    return None


def _find_counter(value: Any) -> int | None:
    if isinstance(value, dict):
        for k, v in value.items():
            name = k.lower()
            if "signature" in name and "comput" in name and isinstance(v, int):
                return v
            found = _find_counter(v)
            if found is not None:
                return found
    return None


def stage_outcomes(manifest: dict[str, Any]) -> dict[str, Any]:
    """Per stage, whatever the manifest says about the cache (keys naming cache or reuse),
    and the manifest's own top-level cache keys: shown in the results as the run said."""
    found: dict[str, Any] = {}
    for stage in manifest.get("stages", []):
        said = _cache_keys(stage)
        if said:
            found[f"{stage.get('position')}:{stage.get('name')}"] = said
    top = {k: v for k, v in manifest.items() if any(w in k.lower() for w in CACHE_WORDS)}
    if top:
        found["manifest"] = top
    return found


def _cache_keys(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            if any(w in k.lower() for w in CACHE_WORDS):
                out[k] = v
            elif isinstance(v, dict):
                inner = _cache_keys(v)
                if inner:
                    out[k] = inner
    return out
