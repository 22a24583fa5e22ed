"""`curate run --explain`: what a run of this recipe would differ in from the newest version.

Said before building, so a user learns why a run would rebuild (or that it would not)
without waiting for it. Nothing is written: the inputs are stat'ed as a run does, and an
input whose size is unchanged but whose modification time or path is not is hashed, so a
file only touched is told from one edited in place. The comparison itself is
`curate.explain`'s, the one `curate diff` uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curate import same_content
from curate.accounting import library_versions
from curate.errors import CurateError
from curate.explain import Side, compare
from curate.fingerprint import (
    base_payload,
    cached_content_hashes,
    content_hash,
    content_identity,
    fingerprint_of,
    input_identity,
    stage_software,
)
from curate.io.digest_cache import file_digests
from curate.io.inputs import InputFile, discover_inputs
from curate.recipe import Recipe
from curate.sealed import latest_sealed
from curate.software import versions
from curate.store import Store


def explain(recipe: Recipe) -> str:
    """The differences between this recipe with its inputs now and the dataset's newest
    published version, and what a run would do about them."""
    with recipe.located():
        files = discover_inputs(recipe.inputs, recipe.base_dir, check=False)
        stages = recipe.build_stages()
        store = Store(recipe.output_root(), recipe.name)
        try:
            hashes = None
            if recipe.input_identity == "content":  # as a run: its cache read, never written

                def load() -> str | None:
                    return store.read_own(".cache", "input-hashes.json")

                hashes = cached_content_hashes(load, files, lambda _: None)
            base = base_payload(recipe, stages)
            fp = fingerprint_of(base, input_identity(files, hashes))
            now_head = f"+++ {recipe.name} now: this recipe and its inputs ({fp[:12]})"
            if not (store.path / "LATEST").exists():
                return f"{now_head}\nno published version in {store.path}: a run builds the first"
            path, manifest = latest_sealed(store.path)
            verdict = _verdict(recipe, store, base, fp, files, path.name)
        finally:
            store.close()
        old = Side.of_manifest(path.name, manifest)
        now = Side(
            "now",
            recipe.resolved(),
            _inputs_now(files, hashes, old.inputs),
            versions(library_versions(stages)),
            list(zip([s.name for s in stages], stage_software(stages), strict=True)),
        )
    lines = [f"--- {manifest['dataset']} {path.name} ({manifest['fingerprint'][:12]})", now_head]
    lines += compare(old, now)
    lines.append(verdict)
    return "\n".join(lines)


def _verdict(
    recipe: Recipe,
    store: Store,
    base: dict[str, Any],
    fp: str,
    files: list[InputFile],
    newest: str,
) -> str:
    """What a run would do, found as a run finds it (the fingerprint's index entry, else the
    version built from inputs of the same content), with nothing written or kept."""
    filed = store.filed(fp)
    if filed is not None:
        name = filed[1][:80]
        return f"up to date: a run returns {name}" + ("" if name == newest else " (not newest)")
    if recipe.input_identity == "stat":
        content = _content_fingerprint(store, base, files, recipe.partition_size)
        filed = store.filed(content) if content is not None else None
        if filed is not None:
            return (
                f"inputs touched, not changed: a run returns {filed[1][:80]}, "
                "built from the same content"
            )
    return "not published: a run builds a new version"


def _content_fingerprint(
    store: Store, base: dict[str, Any], files: list[InputFile], target: int
) -> str | None:
    """`curate.same_content.content_fingerprint` without keeping what it hashed."""
    cache = same_content.load(store)
    found = []
    for inp in files:
        digests = cache.get(inp, target)
        if digests is None:
            try:
                digests = file_digests(inp, target)
            except (CurateError, OSError, ValueError):  # a run's build would say what
                return None
        found.append(digests)
    return fingerprint_of(base, content_identity(files, found))


def _inputs_now(
    files: list[InputFile], hashes: list[str] | None, before: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The inputs as a manifest would record them, content hashed where the stat alone
    cannot tell a touched file from an edited one (same size, other mtime or path)."""
    known = {i["name"]: i for i in before}
    out = []
    for n, f in enumerate(files):
        digest = hashes[n] if hashes is not None else None
        old = known.get(f.name)
        if digest is None and old is not None and old["size"] == f.size:  # stat cannot tell
            digest = content_hash(Path(f.path)) if _moved(old, f) else None
        row = {"name": f.name, "path": f.path, "size": f.size, "mtime_ns": f.mtime_ns}
        out.append({**row, "content_hash": digest})
    return out


def _moved(old: dict[str, Any], f: InputFile) -> bool:
    """Touched or moved since: its modification time or path is not the recorded one."""
    return bool((old["mtime_ns"], old["path"]) != (f.mtime_ns, f.path))
