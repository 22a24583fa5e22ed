"""A dataset's history: its versions listed (`curate log`), two of them compared (`curate diff`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from curate import owned
from curate.cache.settings import cache_size
from curate.explain import Side, aligned, compare
from curate.sealed import version_path
from curate.sizes import format_size
from curate.store import Store


def dataset_folders(root: Path) -> list[Path]:
    """A dataset folder itself, or every dataset folder under an output root (curate.owned)."""
    return owned.dataset_folders(root)[0]


def _manifest(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "manifest.json").read_text())
    return data


def version_folder(path: Path) -> Path:
    """A version folder as given, or a dataset folder's LATEST, as `curate show` takes them."""
    return version_path(Path(path))


def log_rows(root: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for dataset in dataset_folders(root):
        store = Store(dataset.parent, dataset.name)
        latest = store.latest()
        for entry in owned.versions(dataset):
            version = entry.name
            if entry.why is not None:
                why = f"left alone by gc: {entry.why}"
                rows.append({"dataset": dataset.name, "version": version, "broken": why})
                continue
            try:
                m = _manifest(dataset / version)
                row = {
                    "dataset": m["dataset"],
                    "version": version,
                    "latest": version == latest,
                    "created": m["finished"][:19].replace("T", " "),
                    "fingerprint": m["fingerprint"][:12],
                    "documents": m["counts"]["written"],
                    "tokens": m.get("tokens"),
                    "parents": ", ".join(m.get("parents", [])) or "-",
                    "recipe": m.get("recipe_path") or "-",
                }
                row["own_bytes"], row["shared_bytes"] = disk_bytes(dataset / version)
            except (OSError, ValueError, LookupError, TypeError):  # torn or hand-edited
                why = "(manifest unreadable: run curate verify)"
                rows.append({"dataset": dataset.name, "version": version, "broken": why})
                continue
            rows.append(row)
        for left in owned.leftovers(dataset):  # interrupted runs' and removals' folders
            rows.append({"dataset": dataset.name, "leftover": left})
        cached = cache_size(dataset)
        if cached is not None:
            rows.append({"dataset": dataset.name, "cache": cached})
    return rows


def disk_bytes(folder: Path) -> tuple[int, int]:
    """(own, shared) bytes of a version folder: files it alone holds, and files hard-linked
    elsewhere too (`curate.shared_files`: unchanged shards shared with other
    versions), which removing it does not free. Links are not followed."""
    own = shared = 0
    for st in owned.regular_files(folder):
        if st.st_nlink > 1:
            shared += st.st_size
        else:
            own += st.st_size
    return own, shared


def render_log(rows: list[dict[str, Any]], root: Path | None = None) -> str:
    if not rows:
        where = f" under {root} (an output root or one dataset folder)" if root else ""
        return f"no versions{where}"
    lines = []
    for r in rows:
        if r.get("broken"):
            lines.append(f"{r['dataset']}/{r['version']}  {r['broken']}")
            continue
        if "cache" in r:
            size, frees = format_size(r["cache"]), "curate gc --cache frees it"
            lines.append(f"{r['dataset']}/.cache/stages  {size}  stage cache: {frees}")
            continue
        if r.get("leftover"):
            left = r["leftover"]
            lines.append(f"{r['dataset']}/{left.name}  {format_size(left.bytes)}  {left.state()}")
            continue
        mark = " (LATEST)" if r["latest"] else ""
        tokens = f"  {r['tokens']:,} tokens" if r["tokens"] is not None else ""
        size = f"{format_size(r['own_bytes'])} own, {format_size(r['shared_bytes'])} shared"
        lines.append(
            f"{r['dataset']}/{r['version']}{mark}  {r['created']}  {r['fingerprint']}  "
            f"{r['documents']:,} documents{tokens}  {size}  parents: {r['parents']}  "
            f"recipe: {r['recipe']}"
        )
    return "\n".join(lines)


def diff(a: Path, b: Path) -> str:
    """What differs between two version folders, by kind (`curate.explain`: recipe keys,
    inputs and how each change was recognised, software, stage code, settings), then the
    per-stage counts."""
    ma, mb = _manifest(version_folder(a)), _manifest(version_folder(b))
    lines = [f"--- {ma['dataset']} {ma['version']} ({ma['fingerprint'][:12]})"]
    lines.append(f"+++ {mb['dataset']} {mb['version']} ({mb['fingerprint'][:12]})")
    lines += compare(Side.of_manifest("A", ma), Side.of_manifest("B", mb))
    lines.append("stages (in -> out, removed):")
    sa, sb = ma["stages"], mb["stages"]
    for i, j in aligned([x["name"] for x in sa], [y["name"] for y in sb]):
        if i is None or j is None:
            only = sa[i] if i is not None else sb[j]
            label = f"{only['position']}:{only['name']}"
            lines.append(f"  {label}: only in {'A' if i is not None else 'B'}")
            continue
        x, y = sa[i], sb[j]
        label = f"{y['position']}:{y['name']}"
        removed = sorted(set(x["removed"]) | set(y["removed"]))
        deltas = ", ".join(
            f"{r} {x['removed'].get(r, 0):,} -> {y['removed'].get(r, 0):,}"
            for r in removed
            if x["removed"].get(r, 0) != y["removed"].get(r, 0)
        )
        flow_a = f"{x['docs_in']:,} -> {x['docs_out']:,}"
        flow_b = f"{y['docs_in']:,} -> {y['docs_out']:,}"
        lines.append(f"  {label}: {flow_a}  vs  {flow_b}" + (f"; {deltas}" if deltas else ""))
    ca, cb = ma["counts"], mb["counts"]
    lines.append(
        f"written: {ca['written']:,} -> {cb['written']:,} ({cb['written'] - ca['written']:+,})"
    )
    return "\n".join(lines)
