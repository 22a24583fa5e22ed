"""Data that must stay in the building: no network, owner+group modes, no text in logs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from conftest import REPO

BLOCK_NETWORK = """
import socket, sys
def refuse(*args, **kwargs):
    raise RuntimeError(f"network access attempted: {args!r}")
def guard(real):
    def connect(self, address, *args):
        if self.family in (socket.AF_INET, socket.AF_INET6):  # local Unix sockets are not network
            refuse(address)
        return real(self, address, *args)
    return connect
socket.socket.connect = guard(socket.socket.connect)
socket.socket.connect_ex = guard(socket.socket.connect_ex)
socket.create_connection = refuse
socket.getaddrinfo = refuse
from curate.cli import main
sys.argv = ["curate", "run", sys.argv[1]]
main()
"""


def sample_copy(tmp_path: Path) -> Path:
    """The sample recipe, pointed at the repository's sample data, writing under tmp_path."""
    recipe = yaml.safe_load((REPO / "recipes" / "sample.yaml").read_text())
    base = REPO / "recipes"
    recipe["inputs"] = [str((base / p).resolve()) for p in recipe["inputs"]]
    recipe["output"]["root"] = str(tmp_path / "out")
    # files a stage names (a tokenizer, benchmark files), however deep, stay where they are
    recipe["stages"] = absolute_paths(recipe["stages"], base)
    path = tmp_path / "sample.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def absolute_paths(value: Any, base: Path) -> Any:
    """`value` with every string that names an existing file under `base` made absolute."""
    if isinstance(value, dict):
        return {key: absolute_paths(item, base) for key, item in value.items()}
    if isinstance(value, list):
        return [absolute_paths(item, base) for item in value]
    if isinstance(value, str) and value and (base / value).exists():
        return str((base / value).resolve())
    return value


def run_offline(
    recipe: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_NETWORK, str(recipe)],
        capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_sample_recipe_runs_with_the_network_blocked(tmp_path: Path) -> None:
    result = run_offline(sample_copy(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "network access attempted" not in result.stdout + result.stderr
    assert "wrote sample v1" in result.stdout


def test_everything_written_is_owner_and_group_only(tmp_path: Path) -> None:
    os.umask(0o022)  # a permissive umask must not leak into what curate writes
    result = run_offline(sample_copy(tmp_path))
    assert result.returncode == 0, result.stderr
    for path in [tmp_path / "out", *(tmp_path / "out").rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert not mode & 0o007, f"{path} is {oct(mode)}"
    version = tmp_path / "out" / "sample" / "v1"
    assert stat.S_IMODE(version.stat().st_mode) == 0o550  # published: read-only
    assert stat.S_IMODE((version / "manifest.json").stat().st_mode) == 0o440


def test_no_document_text_in_output_at_the_default_log_level(tmp_path: Path) -> None:
    result = run_offline(sample_copy(tmp_path))
    assert result.returncode == 0, result.stderr
    printed = result.stdout + result.stderr
    texts = []
    for path in (REPO / "sample_data" / "web").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                texts.append(json.loads(line)["text"])
            except (ValueError, KeyError, TypeError):
                continue
    snippets = {t.strip()[:40] for t in texts if isinstance(t, str) and len(t.strip()) >= 40}
    assert snippets and not [s for s in snippets if s in printed]


def test_custom_stages_come_only_from_dotted_paths_in_the_recipe(tmp_path: Path) -> None:
    from curate.stages.registry import resolve

    for name in ("os.system", "subprocess:Popen", "builtins.eval"):
        try:
            resolve(name)
        except Exception as exc:  # a CurateError naming what is wrong
            assert "not a curate Stage class" in str(exc) or "cannot import" in str(exc)
        else:
            raise AssertionError(f"{name} resolved to a stage")
