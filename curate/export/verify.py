"""`curate verify` on an export: every file its `export.json` lists is there, inside the
folder, of its listed size and xxh3_128, nothing else is there, and each Megatron index
says the type and sequence count the manifest says."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xxhash
from pydantic import ValidationError

from curate.export.files import CHUNK
from curate.export.record import EXPORT_MANIFEST, ExportManifest
from curate.paths import escape


def is_export(folder: Path) -> bool:
    return (Path(folder) / EXPORT_MANIFEST).is_file()


def verify_export(folder: Path) -> list[str]:
    """Problems found in an export folder; an empty list means it is intact."""
    folder = Path(folder)
    path = folder / EXPORT_MANIFEST
    try:
        manifest = ExportManifest.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError, ValidationError) as exc:
        return [f"{EXPORT_MANIFEST}: not a curate export manifest ({str(exc).splitlines()[0]})"]
    problems: list[str] = []
    listed = {EXPORT_MANIFEST}
    for record in manifest.files:
        listed.add(record.path)
        why = escape(folder, record.path)
        if why is not None:
            problems.append(f"{record.path}: leads outside the export folder ({why})")
            continue
        file = folder / record.path
        if file.is_symlink() or not file.is_file():
            problems.append(f"{record.path}: missing")
        elif file.stat().st_size != record.bytes:
            problems.append(
                f"{record.path}: size {file.stat().st_size}, manifest says {record.bytes}"
            )
        elif _xxh3(file) != record.xxh3_128:
            problems.append(f"{record.path}: xxh3_128 differs from the manifest (content changed)")
    for file in sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()):
        rel = file.relative_to(folder).as_posix()
        if rel not in listed:
            problems.append(f"{rel}: not part of the export (extra file)")
    named = {f.path for f in manifest.files}
    for part in manifest.parts:
        for rel in part.files:
            if rel not in named:
                problems.append(f"part {part.name}: names {rel}, which the manifest does not list")
    if manifest.to == "megatron" and not problems:
        problems += _megatron_problems(folder, manifest)
    return problems


def _megatron_problems(folder: Path, manifest: ExportManifest) -> list[str]:
    from curate.export.megatron import DTYPE_CODES, read_index_header

    problems = []
    code = DTYPE_CODES.get(np.dtype(manifest.dtype or "uint16"))
    for part in manifest.parts:
        rel = f"{part.name}.idx"
        try:
            have, seqs, docs = read_index_header(folder / rel)
        except (OSError, ValueError) as exc:
            problems.append(f"{rel}: {exc}")
            continue
        if (have, seqs, docs) != (code, part.rows, part.rows + 1):
            problems.append(
                f"{rel}: dtype code {have}, {seqs} sequences; the manifest says "
                f"{manifest.dtype} (code {code}), {part.rows}"
            )
    return problems


def _xxh3(path: Path) -> str:
    digest = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
