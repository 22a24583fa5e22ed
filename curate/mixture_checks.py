"""`curate verify` on a mixture (`curate.mix`): its index against its manifest, its sources.

The shards and the index are hashed by `curate.verify` as any version's files are; here the
index is read back: every sample names a source and a row its shards hold, each source gives
the samples and the tokens the manifest records, every prefix keeps each source's share to
within one sample; and each source version is found where the mixture was made from it,
sealed with the fingerprint it names, for `curate.verify` to verify in turn. The bound on
every prefix (`prefix_deviation`) lives here, where both the builder and the check read it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.manifest import Manifest
from curate.mixture_record import MixtureSourceRecord
from curate.output.shards import read_stream
from curate.paths import escape
from curate.sealed import sealed_manifest

Found = tuple[list[str], list[tuple[str, Path]]]


def prefix_deviation(sources: np.ndarray, counts: list[int]) -> float:
    """The largest |samples of source k in the first t - t * n_k / N| over every t and k."""
    total = len(sources)
    t = np.arange(1, total + 1, dtype=np.float64)
    worst = 0.0
    for k, n in enumerate(counts):
        held = np.cumsum(sources == k, dtype=np.int64)
        worst = max(worst, float(np.abs(held - t * (n / total)).max(initial=0.0)))
    return worst


def mixture_problems(folder: Path, manifest: Manifest) -> Found:
    """(problems, [(label, source version folder)] of the sources found sealed, to verify)."""
    record = manifest.mixture
    assert record is not None
    if escape(folder, record.index.path) is not None:
        return [], []  # said by the file checks
    try:
        index = read_stream(folder / record.index.path)
        sources = index.column("source").to_numpy()
        rows = index.column("row").to_numpy()
    except (OSError, KeyError, ValueError, pa.ArrowException) as exc:  # damaged: a finding
        return [f"{record.index.path}: not a mixture index ({exc})"], []
    problems: list[str] = []
    verified: list[tuple[str, Path]] = []
    if len(sources) != record.samples or record.samples != manifest.counts.written:
        problems.append(
            f"{record.index.path}: {len(sources)} samples, the manifest says {record.samples}"
        )
    counts = [int((sources == k).sum()) for k in range(len(record.sources))]
    if sum(counts) != len(sources):
        problems.append(f"{record.index.path}: names sources the manifest does not list")
        return problems, verified
    for k, source in enumerate(record.sources):
        found, at = _source_problems(folder, source, rows[sources == k], counts[k])
        problems += found
        if at is not None:
            verified.append((f"source {source.name} ({source.dataset} {source.version})", at))
    worst = prefix_deviation(sources, counts)
    if worst > 1.0 + 1e-9:
        problems.append(f"{record.index.path}: a prefix is {worst:.3f} samples off its shares")
    if sum(s.tokens for s in record.sources) != record.tokens or record.tokens != manifest.tokens:
        problems.append("mixture: its sources' tokens do not add up to the mixture's")
    return problems, verified


def _source_problems(
    folder: Path, source: MixtureSourceRecord, rows: np.ndarray, count: int
) -> tuple[list[str], Path | None]:
    label = f"source {source.name} ({source.dataset} {source.version})"
    if count != source.samples:
        return [
            f"{label}: the index draws {count} samples, the manifest says {source.samples}"
        ], None
    problems = []
    try:
        tokens = np.concatenate(
            [_row_tokens(folder / path) for path in source.shards if escape(folder, path) is None]
        )
    except (OSError, KeyError, ValueError) as exc:
        return [f"{label}: its shards cannot be read ({exc})"], None
    if len(rows) and (rows.min() < 0 or rows.max() >= len(tokens)):
        problems.append(f"{label}: the index names rows its shards do not hold")
    elif int(tokens[rows].sum()) != source.tokens:
        problems.append(
            f"{label}: its samples hold {int(tokens[rows].sum())} tokens, the manifest says "
            f"{source.tokens}"
        )
    at = Path(source.path)
    _, why = sealed_manifest(at.parent, at.name, source.fingerprint)
    if why is not None:
        problems.append(
            f"{label}: not found as published at {at} ({why}); the mixture keeps its bytes"
        )
        return problems, None
    return problems, at


def _row_tokens(path: Path) -> np.ndarray:
    table = read_stream(path)
    if "num_tokens" in table.schema.names:
        return table.column("num_tokens").to_numpy().astype(np.int64)
    return pc.list_value_length(table.column("input_ids")).to_numpy().astype(np.int64)
