"""A dataset's history: its versions listed (`curate log`), two of them compared (`curate diff`)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from curate import owned
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
            except (OSError, ValueError, LookupError, TypeError):  # torn or hand-edited
                why = "(manifest unreadable: run curate verify)"
                rows.append({"dataset": dataset.name, "version": version, "broken": why})
                continue
            rows.append(row)
        for left in owned.leftovers(dataset):  # interrupted runs' and removals' folders
            rows.append({"dataset": dataset.name, "leftover": left})
    return rows


def render_log(rows: list[dict[str, Any]], root: Path | None = None) -> str:
    if not rows:
        where = f" under {root} (an output root or one dataset folder)" if root else ""
        return f"no versions{where}"
    lines = []
    for r in rows:
        if r.get("broken"):
            lines.append(f"{r['dataset']}/{r['version']}  {r['broken']}")
            continue
        if r.get("leftover"):
            left = r["leftover"]
            lines.append(f"{r['dataset']}/{left.name}  {format_size(left.bytes)}  {left.state()}")
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


def _aligned(a: list[str], b: list[str]) -> list[tuple[int | None, int | None]]:
    """Stage lists matched by name in order (a stage inserted or removed shifts no other):
    (index in a, index in b), None on the side a stage is missing from."""
    pairs: list[tuple[int | None, int | None]] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += [(i1 + k, j1 + k) for k in range(i2 - i1)]
        else:
            pairs += [(i, None) for i in range(i1, i2)] + [(None, j) for j in range(j1, j2)]
    return pairs


def _recipe_changes(ra: dict[str, Any], rb: dict[str, Any]) -> list[str]:
    """Changed recipe keys; stages matched by name, so one added stage is one line."""
    sa, sb = ra.get("stages", []), rb.get("stages", [])
    fa = _flatten({k: v for k, v in ra.items() if k != "stages"})
    fb = _flatten({k: v for k, v in rb.items() if k != "stages"})
    names_a, names_b = [next(iter(x)) for x in sa], [next(iter(x)) for x in sb]
    lines = []
    for i, j in _aligned(names_a, names_b):
        if j is None:
            assert i is not None
            lines.append(f"  stages[{i}].{names_a[i]}: removed")
        elif i is None:
            given = {k: v for k, v in sb[j][names_b[j]].items() if v is not None}
            lines.append(f"  stages[{j}].{names_b[j]}: added" + (f" {given}" if given else ""))
        else:
            prefix = f"stages[{j}].{names_b[j]}"
            fa.update(_flatten(sa[i][names_a[i]], prefix))
            fb.update(_flatten(sb[j][names_b[j]], prefix))
    absent = object()
    changed = [k for k in sorted(set(fa) | set(fb)) if fa.get(k, absent) != fb.get(k, absent)]
    for key in changed:
        old = repr(fa[key]) if key in fa else "(absent)"
        new = repr(fb[key]) if key in fb else "(absent)"
        lines.append(f"  {key}: {old} -> {new}")
    return lines


def diff(a: Path, b: Path) -> str:
    """Recipe, input and per-stage count differences between two version folders."""
    ma, mb = _manifest(version_folder(a)), _manifest(version_folder(b))
    lines = [f"--- {ma['dataset']} {ma['version']} ({ma['fingerprint'][:12]})"]
    lines.append(f"+++ {mb['dataset']} {mb['version']} ({mb['fingerprint'][:12]})")
    changed = _recipe_changes(ma["recipe"], mb["recipe"])
    lines.append("recipe:" if changed else "recipe: same")
    lines += changed
    ia = {i["name"]: i["content_hash"] for i in ma["inputs"]}
    ib = {i["name"]: i["content_hash"] for i in mb["inputs"]}
    moved = [n for n in sorted(set(ia) | set(ib)) if ia.get(n) != ib.get(n)]
    lines.append("inputs:" if moved else "inputs: same")
    for name in moved:
        what = "added" if name not in ia else "removed" if name not in ib else "content changed"
        lines.append(f"  {name}: {what}")
    lines.append("stages (in -> out, removed):")
    sa, sb = ma["stages"], mb["stages"]
    for i, j in _aligned([x["name"] for x in sa], [y["name"] for y in sb]):
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
