"""What every export shares: it appears complete by one rename or not at all (a refusal or a
failure mid-write leaves nothing, not even its staging folder), it never writes over a
folder, its export.json names the source and checksums every file, and `curate verify`
finds a changed byte, a missing or an extra file by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import flip_byte, sealed, writable
from export_fixtures import SAMPLE_TOKENIZER, build

import curate
from curate.export import export
from curate.verify import verify


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> Path:
    stages = [{"tokenize": {"source": str(SAMPLE_TOKENIZER)}}]
    return build(tmp_path_factory.mktemp("export"), "t", stages, split={"validation": 0.1})


def curate_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(curate.__file__).parent.parent)}
    return subprocess.run(
        [sys.executable, "-m", "curate.cli", *args], capture_output=True, text=True, env=env
    )


def test_the_command_exports_and_verify_checks_it(version: Path, tmp_path: Path) -> None:
    out = tmp_path / "meg"
    done = curate_cli("export", str(version.parent), "--to", "megatron", str(out))
    assert done.returncode == 0, done.stderr
    assert "megatron export of t v1 (train, validation)" in done.stdout
    assert "uint16 tokens" in done.stdout
    done = curate_cli("verify", str(out))
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stderr
    data = json.loads((out / "export.json").read_text())
    assert data["format"] == "curate.export" and data["source"]["version"] == "v1"
    assert data["tokenizer"]["policy"]["eos"]["added"] is True
    assert {f["path"] for f in data["files"]} == {
        "train.bin", "train.idx", "validation.bin", "validation.idx"
    }  # fmt: skip


@pytest.mark.parametrize("to", ["megatron", "mds", "parquet", "jsonl"])
def test_verify_names_a_changed_missing_or_extra_file(
    version: Path, tmp_path: Path, to: str
) -> None:
    out = tmp_path / "out"
    m = export(version, to, out)
    assert verify(out) == []
    first = m.files[0].path
    flip_byte(out / first)
    (out / "stray.txt").write_text("x")
    last = m.files[-1].path
    (out / last).unlink()
    problems = verify(out)
    assert f"{first}: xxh3_128 differs from the manifest (content changed)" in problems
    assert f"{last}: missing" in problems
    assert "stray.txt: not part of the export (extra file)" in problems
    done = curate_cli("verify", str(out))
    assert done.returncode == 1 and "stray.txt" in done.stderr


def test_an_existing_folder_is_never_written_over(version: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    done = curate_cli("export", str(version), "--to", "parquet", str(out))
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "already exists" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_a_failure_mid_write_leaves_nothing(version: Path, tmp_path: Path) -> None:
    """A version whose ids do not match its manifest (its tokenizer said to produce ids
    below 100) fails while the first part is written: no export, no staging folder."""
    copy = tmp_path / "src" / "t"
    copy.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(version), str(copy / "v1")], check=True)
    writable(copy / "v1")
    manifest = json.loads((copy / "v1" / "manifest.json").read_text())
    for stage in manifest["stages"]:
        if "tokenizer" in stage.get("details", {}):
            stage["details"]["tokenizer"]["vocab_size"] = 100
    (copy / "v1" / "manifest.json").write_text(json.dumps(manifest))
    sealed(copy / "v1")
    exports = tmp_path / "exports"
    exports.mkdir()
    for to in ("megatron", "mds"):
        with pytest.raises(
            curate.CurateError, match=r"above the largest its tokenizer can produce \(99\)"
        ):
            export(copy / "v1", to, exports / "out")
        assert list(exports.iterdir()) == []


def test_refusals_are_one_line(version: Path, tmp_path: Path) -> None:
    plain = build(tmp_path / "v", "plain", [{"normalize": {}}], n=20)
    done = curate_cli("export", str(plain), "--to", "megatron", str(tmp_path / "out"))
    assert done.returncode != 0 and done.stderr.strip().count("\n") == 0
    assert "holds no token ids" in done.stderr
    done = curate_cli(
        "export", str(version), "--to", "mds", "--dtype", "int32", str(tmp_path / "o")
    )
    assert done.returncode != 0 and "only megatron takes a dtype" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v"]


@pytest.mark.parametrize("kill_at", ["export_part:1", "export_publish:1"])
def test_a_killed_export_leaves_no_export_and_the_next_one_cleans_up(
    version: Path, tmp_path: Path, kill_at: str
) -> None:
    """SIGKILL after the first split is written, and just before the rename: `out` never
    appears; the hidden staging folder of the dead process is removed by the next export to
    the same name, which then completes."""
    out = tmp_path / "exports" / "out"
    out.parent.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(curate.__file__).parent.parent),
        "CURATE_PHASE_LOG": str(tmp_path / "phases.log"),
        "CURATE_KILL_AT": kill_at,
    }
    done = subprocess.run(
        [sys.executable, "-m", "curate.cli", "export", str(version), "--to", "mds", str(out)],
        env=env, capture_output=True, timeout=300, start_new_session=True,
    )  # fmt: skip
    assert done.returncode == -9, done.stderr
    left = list(out.parent.iterdir())
    assert not out.exists() and len(left) == 1 and left[0].name.startswith(".out.export-")
    export(version, "mds", out)
    assert [p.name for p in out.parent.iterdir()] == ["out"]
    assert verify(out) == []
