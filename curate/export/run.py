"""`curate export`: refuse what a format cannot carry, then write every part into a staging
folder, the export manifest last, and rename it into place."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from curate import phases
from curate.errors import CurateError
from curate.export.dtypes import megatron_dtype
from curate.export.record import (
    ExportFile,
    ExportManifest,
    ExportPart,
    ExportSource,
    remember,
    write_manifest,
)
from curate.export.source import Part, Source
from curate.export.staging import check_target, staged

FORMATS = ("megatron", "mds", "parquet", "jsonl")
DTYPES = ("auto", "uint16", "int32")
_STORED_MAX = {"uint16": (1 << 16) - 1, "uint32": (1 << 32) - 1}


def export(version: str | Path, to: str, out: str | Path, *, dtype: str = "auto") -> ExportManifest:
    """Export a published version (its folder, or a dataset folder for its LATEST) to `out`,
    which must not exist. Returns the export manifest written as `out/export.json`."""
    if to not in FORMATS:
        raise CurateError(f"--to {to}: not a format curate exports ({', '.join(FORMATS)})")
    if dtype not in DTYPES or (dtype != "auto" and to != "megatron"):
        raise CurateError(f"--dtype {dtype}: only megatron takes a dtype (auto, uint16, int32)")
    target = check_target(Path(out))
    source = Source.open(version)
    plan = _plan(source, to, dtype)
    with staged(target) as folder:
        parts: list[ExportPart] = []
        files: list[ExportFile] = []
        for part in source.parts():
            record, written = _write(source, part, folder, to, plan)
            parts.append(record)
            files += written
            phases.mark("export_part")
        manifest = _manifest(source, to, plan, parts, files)
        write_manifest(folder, manifest)
    remember(source.version.path, target, to)  # for erasure requests (curate forget --where)
    return manifest


def _plan(source: Source, to: str, dtype: str) -> dict[str, Any]:
    """What the format needs, decided (or refused, in one line) before anything is written."""
    tokenizer = source.tokenizer()
    stored = source.stored_type()
    if to in ("megatron", "mds") and not source.tokenized:
        raise CurateError(
            f"{source.label} holds no token ids (its recipe has no tokenize or chat_template "
            f"stage): {to} stores tokens; export it --to parquet or jsonl, or tokenize it first"
        )
    max_id = (tokenizer or {}).get("max_id")
    if max_id is None and stored is not None:
        max_id = _STORED_MAX[stored]  # a chat template records no vocabulary: the stored type
    if to == "megatron":
        if source.loss_column is not None:
            raise CurateError(
                f"{source.label} is a chat version: Megatron's indexed dataset holds token ids "
                f"only, so its {source.loss_column} (which tokens carry the loss) would be lost; "
                "export it --to mds, parquet or jsonl"
            )
        assert max_id is not None
        return {"dtype": megatron_dtype(int(max_id), dtype, source.label), "max_id": max_id}
    return {"dtype": np.dtype(stored) if stored else None, "max_id": max_id}


def _write(
    source: Source, part: Part, folder: Path, to: str, plan: dict[str, Any]
) -> tuple[ExportPart, list[ExportFile]]:
    if to == "megatron":
        from curate.export import megatron

        return megatron.write_part(source, part, folder, plan["dtype"], plan["max_id"])
    if to == "mds":
        from curate.export import mds

        return mds.write_part(source, part, folder, plan["max_id"])
    from curate.export import tables

    return tables.write_part(source, part, folder, to)


def _manifest(
    source: Source, to: str, plan: dict[str, Any], parts: list[ExportPart], files: list[ExportFile]
) -> ExportManifest:
    m = source.manifest
    chat = None
    if source.loss_column is not None:
        packing = source.packing()
        chat = {
            "loss": source.loss_column,
            "packed": packing is not None,
            **({"seq_len": packing["seq_len"], "columns": ["position_ids", "cu_seqlens"]}
               if packing else {}),
        }  # fmt: skip
    dtype = plan["dtype"]
    return ExportManifest(
        to=to,
        source=ExportSource(
            dataset=m["dataset"],
            version=m["version"],
            fingerprint=m["fingerprint"],
            path=str(source.version.path),
            manifest_sha256=source.manifest_sha256(),
        ),
        tokenizer=source.tokenizer(),
        chat=chat,
        dtype=None if dtype is None else str(dtype),
        columns=[{"name": n, "type": t} for n, t in source.columns],
        parts=parts,
        files=files,
        software={"curate": _version("curate"), "pyarrow": _version("pyarrow")},
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"
