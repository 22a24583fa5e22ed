"""What differs between two makings of a dataset, by kind: why a rebuild happened.

One comparison serves `curate diff A B` (two published versions) and `curate run
--explain` (a recipe and its inputs now against the newest version): input files added,
removed or changed, and how each change was recognised (size, modification time only,
content hash); recipe keys that reach the data, as dotted paths (old -> new); library
versions and the files a stage reads (a tokenizer's); the code of each stage; and,
apart, the settings that never rebuild anything (engine, output root, modes). Only
names, sizes, hashes and recipe values are shown, never document text.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from curate.fingerprint import CODE_KEY, content_keys

_LONG = 80
_FINGERPRINTED = {"curate"}
"""Top-level software keys the fingerprint covers besides every stage's own (software.py's
other versions are recorded in the manifest, not fingerprinted)."""


@dataclass
class Side:
    """What one making of a dataset was made from, as a manifest records it."""

    name: str  # how lines name this side: "A", "v3", "now"
    recipe: dict[str, Any]  # resolved
    inputs: list[dict[str, Any]]  # name, path, size, mtime_ns, content_hash (None: not hashed)
    software: dict[str, str]
    stages: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # name, software

    @classmethod
    def of_manifest(cls, name: str, manifest: dict[str, Any]) -> Side:
        inputs = [
            {k: i.get(k) for k in ("name", "path", "size", "mtime_ns", "content_hash")}
            for i in manifest["inputs"]
        ]
        stages = [(s["name"], dict(s.get("software", {}))) for s in manifest["stages"]]
        return cls(name, manifest["recipe"], inputs, dict(manifest.get("software", {})), stages)


def compare(a: Side, b: Side) -> list[str]:
    """Lines naming every difference from a to b, one section per kind ("kind: same" when
    there is none)."""
    settings = recipe_changes(setting_keys(a.recipe), setting_keys(b.recipe))
    lines: list[str] = []
    for title, found in (
        ("recipe", recipe_changes(content_keys(a.recipe), content_keys(b.recipe))),
        ("inputs", input_changes(a.inputs, b.inputs)),
        ("software", software_changes(a, b)),
        ("stage code", code_changes(a, b)),
        ("settings (change no data)", settings),
    ):
        lines.append(f"{title}:" if found else f"{title}: same")
        lines += found
    return lines


def setting_keys(recipe: dict[str, Any]) -> dict[str, Any]:
    """The settings that only change how or where a run happens (what `data_keys` drops)."""
    kept = content_keys(recipe)["output"]
    output = {k: v for k, v in recipe.get("output", {}).items() if k not in kept}
    return {"engine": recipe.get("engine", {}), "output": output}


# -- inputs ------------------------------------------------------------------------------
def input_changes(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
    """Inputs added, removed or changed, matched by name, each with how it was recognised."""
    ia, ib = {i["name"]: i for i in a}, {i["name"]: i for i in b}
    lines = []
    for name in sorted(set(ia) | set(ib)):
        x, y = ia.get(name), ib.get(name)
        if x is None:
            assert y is not None
            lines.append(f"  {name}: added ({y['size']:,} bytes)")
        elif y is None:
            lines.append(f"  {name}: removed")
        elif how := input_change(x, y):
            lines.append(f"  {name}: {how}")
    return lines


def input_change(x: dict[str, Any], y: dict[str, Any]) -> str | None:
    """How an input differs, said with the evidence: None when it is the same."""
    size = f"size {x['size']:,} -> {y['size']:,}" if x["size"] != y["size"] else "same size"
    ha, hb = x.get("content_hash"), y.get("content_hash")
    if ha is not None and hb is not None:
        if ha != hb:
            return f"content changed ({size}, content hash differs)"
        if x["path"] != y["path"]:
            return f"moved from {x['path']}, content the same (content hash)"
        if x["mtime_ns"] != y["mtime_ns"]:
            return "touched: modification time changed, content the same (content hash)"
        return None
    if x["size"] != y["size"]:
        return f"content changed ({size})"
    if x["path"] != y["path"]:
        return f"moved from {x['path']} (same size, content not hashed)"
    if x["mtime_ns"] != y["mtime_ns"]:
        return "modification time changed (same size, content not hashed)"
    return None


# -- software and code -------------------------------------------------------------------
def software_changes(a: Side, b: Side) -> list[str]:
    """Library versions and stage files (a tokenizer's, a benchmark's) that differ: each
    stage's own, then the rest of what the manifest records."""
    lines, per_stage = [], set()
    for i, j in aligned([n for n, _ in a.stages], [n for n, _ in b.stages]):
        if i is None or j is None:
            continue  # a stage added or removed is a recipe change
        sa, sb = a.stages[i][1], b.stages[j][1]
        label = f"stages[{j}].{b.stages[j][0]}"
        for key in sorted((set(sa) | set(sb)) - {CODE_KEY, "source_sha256"}):
            per_stage.add(key)
            if sa.get(key) != sb.get(key):
                lines.append(f"  {label} {key}: {_value(sa, key)} -> {_value(sb, key)}")
    for key in sorted((set(a.software) | set(b.software)) - per_stage):
        if a.software.get(key) != b.software.get(key):
            note = "" if key in _FINGERPRINTED else " (recorded only: not in the fingerprint)"
            lines.append(f"  {key}: {_value(a.software, key)} -> {_value(b.software, key)}{note}")
    return lines


def code_changes(a: Side, b: Side) -> list[str]:
    """Stages whose code (their module and the modules it imports) differs."""
    lines = []
    for i, j in aligned([n for n, _ in a.stages], [n for n, _ in b.stages]):
        if i is None or j is None:
            continue
        ca, cb = a.stages[i][1].get(CODE_KEY), b.stages[j][1].get(CODE_KEY)
        label = f"stages[{j}].{b.stages[j][0]}"
        if ca is None or cb is None:
            if ca != cb:
                missing = a.name if ca is None else b.name
                lines.append(f"  {label}: unknown (its code hash is not recorded in {missing})")
        elif ca != cb:
            lines.append(f"  {label}: changed")
    return lines


# -- recipe ------------------------------------------------------------------------------
def recipe_changes(ra: dict[str, Any], rb: dict[str, Any]) -> list[str]:
    """Changed recipe keys as dotted paths; stages matched by name, so one added stage is one
    line and the stages after it are not called changed."""
    sa, sb = ra.get("stages", []), rb.get("stages", [])
    fa = flatten({k: v for k, v in ra.items() if k != "stages"})
    fb = flatten({k: v for k, v in rb.items() if k != "stages"})
    names_a, names_b = [next(iter(x)) for x in sa], [next(iter(x)) for x in sb]
    lines = []
    for i, j in aligned(names_a, names_b):
        if j is None:
            assert i is not None
            lines.append(f"  stages[{i}].{names_a[i]}: removed")
        elif i is None:
            given = {k: v for k, v in sb[j][names_b[j]].items() if v is not None}
            added = f" {_short(repr(given))}" if given else ""
            lines.append(f"  stages[{j}].{names_b[j]}: added{added}")
        else:
            prefix = f"stages[{j}].{names_b[j]}"
            fa.update(flatten(sa[i][names_a[i]], prefix))
            fb.update(flatten(sb[j][names_b[j]], prefix))
    for key in sorted(set(fa) | set(fb)):
        if key not in fa or key not in fb or fa[key] != fb[key]:
            lines.append(f"  {key}: {_value(fa, key)} -> {_value(fb, key)}")
    return lines


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def aligned(a: list[str], b: list[str]) -> list[tuple[int | None, int | None]]:
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


def _value(values: dict[str, Any], key: str) -> str:
    return _short(repr(values[key])) if key in values else "(absent)"


def _short(text: str) -> str:
    return text if len(text) <= _LONG else text[: _LONG - 3] + "..."
