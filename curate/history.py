"""A dataset's history: its versions listed (`curate log`), two of them compared (`curate diff`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from curate.errors import CurateError
from curate.store import Store


def dataset_folders(root: Path) -> list[Path]:
    """A dataset folder itself, or every dataset folder under an output root."""
    root = Path(root)
    if (root / "LATEST").is_file() or any(Store(root.parent, root.name).versions()):
        return [root]
    if not root.is_dir():
        raise CurateError(f"{root} does not exist")
    return sorted(p for p in root.iterdir() if p.is_dir() and Store(root, p.name).versions())


def _manifest(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "manifest.json").read_text())
    return data


def version_folder(path: Path) -> Path:
    """A version folder as given, or a dataset folder's LATEST, as `curate show` takes them."""
    path = Path(path)
    if (path / "manifest.json").is_file():
        return path
    latest = Store(path.parent, path.name).latest()
    if latest and (path / latest / "manifest.json").is_file():
        return path / latest
    raise CurateError(
        f"{path} is not a version (no manifest.json) nor a dataset folder with a LATEST version"
    )


def log_rows(root: Path) -> list[dict[str, Any]]:
    rows = []
    for dataset in dataset_folders(root):
        store = Store(dataset.parent, dataset.name)
        latest = store.latest()
        for version in store.versions():
            try:
                m = _manifest(dataset / version)
            except (OSError, ValueError):
                rows.append({"dataset": dataset.name, "version": version, "broken": True})
                continue
            rows.append(
                {
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
            )
    return rows


def render_log(rows: list[dict[str, Any]], root: Path | None = None) -> str:
    if not rows:
        where = f" under {root} (an output root or one dataset folder)" if root else ""
        return f"no versions{where}"
    lines = []
    for r in rows:
        if r.get("broken"):
            lines.append(f"{r['dataset']}/{r['version']}  (manifest unreadable: run curate verify)")
            continue
        mark = " (LATEST)" if r["latest"] else ""
        tokens = f"  {r['tokens']:,} tokens" if r["tokens"] is not None else ""
        lines.append(
            f"{r['dataset']}/{r['version']}{mark}  {r['created']}  {r['fingerprint']}  "
            f"{r['documents']:,} documents{tokens}  parents: {r['parents']}  recipe: {r['recipe']}"
        )
    return "\n".join(lines)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def diff(a: Path, b: Path) -> str:
    """Recipe, input and per-stage count differences between two version folders."""
    ma, mb = _manifest(version_folder(a)), _manifest(version_folder(b))
    lines = [f"--- {ma['dataset']} {ma['version']} ({ma['fingerprint'][:12]})"]
    lines.append(f"+++ {mb['dataset']} {mb['version']} ({mb['fingerprint'][:12]})")
    ra, rb = _flatten(ma["recipe"]), _flatten(mb["recipe"])
    absent = object()
    changed = [k for k in sorted(set(ra) | set(rb)) if ra.get(k, absent) != rb.get(k, absent)]
    lines.append("recipe:" if changed else "recipe: same")
    for key in changed:
        old = repr(ra[key]) if key in ra else "(absent)"
        new = repr(rb[key]) if key in rb else "(absent)"
        lines.append(f"  {key}: {old} -> {new}")
    ia = {i["name"]: i["content_hash"] for i in ma["inputs"]}
    ib = {i["name"]: i["content_hash"] for i in mb["inputs"]}
    moved = [n for n in sorted(set(ia) | set(ib)) if ia.get(n) != ib.get(n)]
    lines.append("inputs:" if moved else "inputs: same")
    for name in moved:
        what = "added" if name not in ia else "removed" if name not in ib else "content changed"
        lines.append(f"  {name}: {what}")
    lines.append("stages (in -> out, removed):")
    sa = {f"{s['position']}:{s['name']}": s for s in ma["stages"]}
    sb = {f"{s['position']}:{s['name']}": s for s in mb["stages"]}
    for label in list(dict.fromkeys([*sa, *sb])):
        x, y = sa.get(label), sb.get(label)
        if x is None or y is None:
            lines.append(f"  {label}: only in {'B' if x is None else 'A'}")
            continue
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
