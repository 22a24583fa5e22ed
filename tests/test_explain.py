"""`curate run --explain` and `curate diff` name why a rebuild happens, by kind: input files
added, removed or changed (and how recognised: size, modification time only, content hash),
recipe keys (dotted, old -> new), library versions, stage code; `--explain` writes nothing.

Real recipes, real versions on disk; a changed library and an edited built-in stage are
made real too (a module on PYTHONPATH, a copy of curate), each run in its own process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from conftest import write_jsonl, write_recipe

import curate
from curate.cli import main


def cli(*args: str) -> list[str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def section(lines: list[str], title: str) -> list[str]:
    """The lines under `title:` (none when it says `title: same`)."""
    if f"{title}: same" in lines:
        return []
    start = lines.index(f"{title}:") + 1
    end = start
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[start:end]


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under a folder with its size, mtime and mode (links not followed)."""
    if not folder.exists():
        return {}
    out = {}
    for path in [folder, *folder.rglob("*")]:
        st = path.lstat()
        out[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def _touch(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_explain_names_each_input_change_and_how_it_was_recognised(project: Path) -> None:
    data = project / "data"
    write_jsonl(data / "e.jsonl", [{"id": "e1", "text": "to be removed"}])
    write_jsonl(data / "s.jsonl", [{"id": "s1", "text": "edited in place, same size"}])
    recipe = write_recipe(project)
    v1 = curate.run(recipe)
    size_b = (data / "b.jsonl").stat().st_size

    _touch(data / "a.jsonl")  # the same bytes
    with open(data / "b.jsonl", "a") as f:  # grown
        f.write(json.dumps({"id": "b-new", "text": "one more document"}) + "\n")
    write_jsonl(data / "s.jsonl", [{"id": "s1", "text": "edited in place, same SIZE"}])
    (data / "e.jsonl").unlink()
    write_jsonl(data / "c.jsonl", [{"id": "c1", "text": "new"}])
    grown = (data / "b.jsonl").stat().st_size
    added = (data / "c.jsonl").stat().st_size

    before = snapshot(project / "out")
    lines = cli("run", "--explain", str(recipe))
    assert snapshot(project / "out") == before  # nothing written, not even a cache file
    assert lines[0] == f"--- t v1 ({v1.fingerprint[:12]})"
    assert section(lines, "inputs") == [
        "  data/a.jsonl: touched: modification time changed, content the same (content hash)",
        f"  data/b.jsonl: content changed (size {size_b:,} -> {grown:,})",
        f"  data/c.jsonl: added ({added:,} bytes)",
        "  data/e.jsonl: removed",
        "  data/s.jsonl: content changed (same size, content hash differs)",
    ]
    for kind in ("recipe", "software", "stage code", "settings (change no data)"):
        assert f"{kind}: same" in lines
    assert lines[-1] == "not published: a run builds a new version"

    v2 = curate.run(recipe)
    diff = cli("diff", str(v1.path), str(v2.path))
    assert section(diff, "inputs") == [
        "  data/a.jsonl: touched: modification time changed, content the same (content hash)",
        f"  data/b.jsonl: content changed (size {size_b:,} -> {grown:,}, content hash differs)",
        f"  data/c.jsonl: added ({added:,} bytes)",
        "  data/e.jsonl: removed",
        "  data/s.jsonl: content changed (same size, content hash differs)",
    ]
    assert "recipe: same" in diff and "stage code: same" in diff

    lines = cli("run", "--explain", str(recipe))
    assert lines[-1] == "up to date: a run returns v2"
    assert all(f"{kind}: same" in lines for kind in ("recipe", "inputs", "stage code"))


def test_touched_inputs_are_named_and_rebuild_nothing(project: Path) -> None:
    """The issue's case: touching an input rebuilt everything and diff said "inputs: same".
    Now --explain names the touch, says a run returns the version built from the same
    content, and keeps nothing of what it hashed (the run does)."""
    recipe = write_recipe(project)
    v1 = curate.run(recipe)
    _touch(project / "data" / "a.jsonl")
    _touch(project / "data" / "b.jsonl")
    before = snapshot(project / "out")
    lines = cli("run", "--explain", str(recipe))
    assert snapshot(project / "out") == before  # the digest cache and index untouched
    assert section(lines, "inputs") == [
        f"  data/{n}.jsonl: touched: modification time changed, content the same (content hash)"
        for n in ("a", "b")
    ]
    assert lines[-1] == "inputs touched, not changed: a run returns v1, built from the same content"
    assert curate.run(recipe).name == v1.name
    assert cli("run", "--explain", str(recipe))[-1] == "up to date: a run returns v1"


def test_explain_and_diff_name_recipe_keys_and_keep_settings_apart(project: Path) -> None:
    v1 = curate.run(write_recipe(project))
    recipe = write_recipe(
        project,
        stages=[
            {"normalize": {"form": "NFKC"}},
            {"filter_length": {"min_words": 3}},
            {"exact_dedup": {}},
        ],
        text_field="body",
        engine={"workers": 2},
        output={"root": "out", "fsync": False, "file_mode": "0600"},
    )
    for r in ("a", "b"):  # the documents' text now under `body`
        path = project / "data" / f"{r}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        write_jsonl(path, [{"id": d["id"], "body": d["text"]} for d in rows])
    before = snapshot(project / "out")
    lines = cli("run", "--explain", str(recipe))
    assert snapshot(project / "out") == before
    changes = [
        "  stages[1].filter_length: added {'min_words': 3}",
        "  stages[0].normalize.form: 'NFC' -> 'NFKC'",
        "  text_field: 'text' -> 'body'",
    ]
    assert section(lines, "recipe") == changes
    settings = ["  engine.workers: 1 -> 2", "  output.file_mode: '0640' -> '0600'"]
    assert section(lines, "settings (change no data)") == settings
    assert "stage code: same" in lines  # exact_dedup moved, and was not changed
    assert lines[-1] == "not published: a run builds a new version"
    text = "\n".join(lines)
    assert "Document 1 says" not in text and "w7" not in text  # no document text

    v2 = curate.run(recipe)
    diff = cli("diff", str(v1.path), str(v2.path))
    assert section(diff, "recipe") == changes
    assert section(diff, "settings (change no data)") == settings
    assert section(diff, "inputs")  # rewritten files: changed content


def test_explain_before_the_first_version_writes_nothing(project: Path) -> None:
    recipe = write_recipe(project)
    lines = cli("run", "--explain", str(recipe))
    assert lines[-1] == f"no published version in {project / 'out' / 't'}: a run builds the first"
    assert not (project / "out").exists()


def test_explain_with_content_identity_reads_the_hash_cache_and_writes_none(
    project: Path,
) -> None:
    recipe = write_recipe(project, input_identity="content")
    v1 = curate.run(recipe)
    _touch(project / "data" / "a.jsonl")
    before = snapshot(project / "out")
    lines = cli("run", "--explain", str(recipe))
    assert snapshot(project / "out") == before  # .cache/input-hashes.json left as it was
    assert section(lines, "inputs") == [
        "  data/a.jsonl: touched: modification time changed, content the same (content hash)"
    ]
    assert lines[-1] == f"up to date: a run returns {v1.name}"


_STAGE = """
from curate.stages.base import MapStage, StageParams, StageResult
import mylib


class Keep(MapStage):
    name = "keep"
    Params = StageParams

    def software(self):
        return {"mylib": mylib.VERSION}

    def process(self, batch):
        return StageResult(batch)
"""

_CLI = "import sys\nfrom curate.cli import main\nsys.exit(main())\n"


def test_a_library_version_and_a_stage_code_change_are_named(tmp_path: Path) -> None:
    code = tmp_path / "code"
    shutil.copytree(
        Path(curate.__file__).parent,
        code / "curate",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (code / "mylab").mkdir()
    (code / "mylab" / "__init__.py").write_text("")
    (code / "mylab" / "stage.py").write_text(_STAGE)
    (code / "mylib.py").write_text('VERSION = "1.0"\n')
    project = tmp_path / "project"
    write_jsonl(project / "data" / "a.jsonl", [{"id": "1", "text": "a"}, {"id": "2", "text": "b"}])
    recipe = write_recipe(
        project, stages=[{"normalize": {}}, {"mylab.stage:Keep": {}}, {"exact_dedup": {}}]
    )

    def curate_cli(*args: str) -> list[str]:
        env = {**os.environ, "PYTHONPATH": str(code)}
        out = subprocess.run(
            [sys.executable, "-c", _CLI, *args],
            env=env, cwd=project, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return out.stdout.splitlines()

    curate_cli("run", "--quiet", str(recipe))
    (code / "mylib.py").write_text('VERSION = "1.1"\n')  # a library upgraded
    normalize = code / "curate" / "stages" / "normalize.py"  # curate's code fixed, same version
    normalize.write_text(normalize.read_text() + "\n_FIXED = True\n")

    before = snapshot(project / "out")
    lines = curate_cli("run", "--explain", str(recipe))
    assert snapshot(project / "out") == before
    software = ["  stages[1].keep mylib: '1.0' -> '1.1'"]
    assert section(lines, "software") == software
    assert section(lines, "stage code") == ["  stages[0].normalize: changed"]
    assert "recipe: same" in lines and "inputs: same" in lines
    assert lines[-1] == "not published: a run builds a new version"

    curate_cli("run", "--quiet", str(recipe))
    dataset = project / "out" / "t"
    diff = curate_cli("diff", str(dataset / "v1"), str(dataset / "v2"))
    assert section(diff, "software") == software
    assert section(diff, "stage code") == ["  stages[0].normalize: changed"]
    manifest: dict[str, Any] = json.loads((dataset / "v2" / "manifest.json").read_text())
    assert all(len(s["software"]["code_sha256"]) == 64 for s in manifest["stages"])
