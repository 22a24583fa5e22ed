"""Checking a published version against its own manifest: every byte, every file, every count.

`curate verify` is what to run before a long training job, or after copying a version
to another machine: a flipped byte, a missing or an extra file, or counts that do not
reconcile are each reported by name. It first makes the cheap check `prepare()` and
`open()` make on every call (`curate.integrity`: present, own, of the listed size), then
hashes every listed file. A damaged file that versions share through a hard link
(`curate.shared_files`) damages every version holding it: the report names them all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from curate.digests import sha256_file
from curate.hf_layout import data_files, hf_files, split_folders
from curate.integrity import file_problem
from curate.manifest import CardFile, FileRecord, Manifest, StatisticsFile
from curate.mixture_checks import mixture_problems
from curate.mixture_record import MixtureIndex
from curate.paths import escape
from curate.sealed import VERSION_NAME


def verify(folder: Path) -> list[str]:
    """Problems found in a version folder; an empty list means it is intact."""
    folder = Path(folder)
    path = folder / "manifest.json"
    if not path.exists():
        from curate.export.verify import is_export, verify_export

        if is_export(folder):  # an export's own manifest (curate.export)
            return verify_export(folder)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return [f"{path}: missing"]
    except (OSError, ValueError) as exc:
        return [f"{path}: unreadable: {exc}"]
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        return [
            f"{path}: does not match the manifest schema: {e['loc']}: {e['msg']}"
            for e in exc.errors()
        ]

    problems: list[str] = []
    splits = list(manifest.splits.splits) if manifest.splits is not None else []
    # a mixture has no datasets layout: its index says which rows are its samples
    layout = hf_files(splits, manifest.layout) if manifest.mixture is None else set()
    listed = {"manifest.json", *layout}
    folders: dict[str, str | None] = {}
    extra: list[FileRecord | StatisticsFile | CardFile | MixtureIndex] = [
        *([manifest.statistics] if manifest.statistics else []),
        *([manifest.card] if manifest.card is not None else []),
        *([manifest.mixture.index] if manifest.mixture is not None else []),
        *(manifest.lineage or []),
    ]
    records = [*manifest.shards, *manifest.rejected, *manifest.quarantine, *manifest.examples]
    for record in [*records, *extra]:
        listed.add(record.path)
        problem = escape(folder, record.path)
        if problem is not None:  # a copy elsewhere with the right bytes must not pass
            problems.append(f"{record.path}: leads outside the version folder ({problem})")
            continue
        problem = file_problem(folder, record.path, record.bytes, folders)  # the cheap check
        if problem is None and sha256_file(folder / record.path) != record.sha256:
            problem = "sha256 differs from the manifest (content changed)"
        if problem is not None:
            problems.append(f"{record.path}: {problem}{_also_in(folder, record.path)}")
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder).as_posix()
        if rel not in listed:
            problems.append(f"{rel}: not part of the version (extra file)")
    for name in sorted(layout):
        problem = escape(folder, name)
        if problem is not None:  # a split named '..'
            problems.append(f"{name}: leads outside the version folder ({problem})")
        elif (problem := file_problem(folder, name, None, folders)) is not None:
            problems.append(f"{name}: {problem}")
    problems += _state_problems(folder, manifest)
    c = manifest.counts
    if c.read != c.written + c.removed_total + c.quarantined:
        problems.append(
            f"counts do not reconcile: read {c.read} != written {c.written} "
            f"+ removed {c.removed_total} + quarantined {c.quarantined}"
        )
    held = sum(s.documents if s.documents is not None else s.rows for s in manifest.shards)
    if manifest.mixture is not None:  # its samples are the index's rows, drawn from its shards
        found, sources = mixture_problems(folder, manifest)
        problems += found
        for label, source in sources:  # found sealed with the fingerprint the mixture names
            problems += [f"{label}: {p}" for p in verify(source)]
    elif held != c.written:
        problems.append(f"shards hold {held} documents, counts say {c.written}")
    if manifest.splits is not None:
        problems += _split_problems(manifest)
    if manifest.packing is not None:
        problems += _packing_problems(manifest)
    return problems


def _also_in(folder: Path, path: str) -> str:
    """The other versions of the dataset holding this very file (a hard link: one inode), which
    its damage damages too; "" when it is no shared file."""
    try:
        st = os.lstat(folder / path)
        siblings = sorted(os.scandir(folder.parent), key=lambda e: e.name)
    except OSError:
        return ""
    if st.st_nlink < 2:
        return ""
    holders = []
    for entry in siblings:
        if entry.name == folder.name or not VERSION_NAME.match(entry.name):
            continue
        if not entry.is_dir(follow_symlinks=False) or escape(Path(entry.path), path) is not None:
            continue
        try:
            other = os.lstat(os.path.join(entry.path, path))
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            holders.append(entry.name)
    if not holders:
        return ""
    return f"; the same file (hard-linked) is in {', '.join(holders)} too, damaged as well"


def _packing_problems(manifest: Manifest) -> list[str]:
    """The packing record agrees with the shards it sums: its tokens, and its tail shards
    (each listed as a shard, holding the tail tokens and the tokens lost)."""
    packing, problems = manifest.packing, []
    assert packing is not None
    if packing.tokens != (manifest.tokens or 0):
        problems.append(f"packing counts {packing.tokens} tokens, the manifest {manifest.tokens}")
    tails = {s.path: s for s in manifest.shards if s.path in packing.tail_shards}
    missing = sorted(set(packing.tail_shards) - set(tails))
    if missing:
        problems.append(f"packing names tail shards that are not shards: {', '.join(missing)}")
    tail_tokens = sum(s.tokens or 0 for s in tails.values())
    if tail_tokens != packing.tail_tokens or packing.tokens_lost > tail_tokens:
        problems.append(
            f"packing counts {packing.tail_tokens} tail tokens ({packing.tokens_lost} lost), "
            f"its tail shards hold {tail_tokens}"
        )
    full = packing.tokens_in_full_rows
    if full is not None and full + packing.tokens_lost != packing.tokens:
        problems.append("packing: tokens in full rows and tokens lost do not add up to tokens")
    return problems


def _state_problems(folder: Path, manifest: Manifest) -> list[str]:
    """dataset_dict.json names the manifest's split folders, and each state.json lists
    exactly its split's shards from the manifest, in order: what `datasets` reads is what was
    hashed above."""
    if manifest.mixture is not None:
        return []
    problems = []
    splits = list(manifest.splits.splits) if manifest.splits is not None else []
    names = split_folders(splits, manifest.layout)
    if names and (folder / "dataset_dict.json").is_file():
        try:
            listed = json.loads((folder / "dataset_dict.json").read_text())["splits"]
        except (OSError, ValueError, KeyError, TypeError):
            listed = None
        if listed != names:  # datasets loads each folder it names, '../..' included
            problems.append("dataset_dict.json: names other splits than the manifest")
    shards = [(s.path, s.split) for s in manifest.shards]
    for state, want in data_files(shards, splits, manifest.layout).items():
        if escape(folder, state) is not None or not (folder / state).is_file():
            continue  # reported above
        try:
            data = json.loads((folder / state).read_text())
            have = [entry["filename"] for entry in data["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError):
            problems.append(f"{state}: not a datasets state.json (no '_data_files' list)")
            continue
        if have != want:
            problems.append(f"{state}: lists other files than the manifest's shards")
    return problems


def _split_problems(manifest: Manifest) -> list[str]:
    """Each split's record matches its shards, and the splits add up to the documents written."""
    assert manifest.splits is not None
    problems = []
    for name, record in manifest.splits.splits.items():
        own = [s for s in manifest.shards if s.split == name]
        docs = sum(s.documents if s.documents is not None else s.rows for s in own)
        if (docs, sum(s.rows for s in own), len(own)) != (
            record.documents,
            record.rows,
            record.shards,
        ):
            problems.append(
                f"split {name}: its shards hold {docs} documents in {len(own)} shards, "
                f"the manifest says {record.documents} in {record.shards}"
            )
    stray = sorted({str(s.split) for s in manifest.shards} - set(manifest.splits.splits))
    if stray:
        problems.append(f"shards of splits the manifest does not name: {', '.join(stray)}")
    total = sum(r.documents for r in manifest.splits.splits.values())
    if total != manifest.counts.written:
        problems.append(f"splits hold {total} documents, counts say {manifest.counts.written}")
    return problems
