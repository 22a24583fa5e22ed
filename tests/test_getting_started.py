"""docs/getting-started.md works as written: its code blocks run in order in a scratch
folder laid out like a checkout (the sample tokenizer it names), with this curate.

A block after `<!-- file: NAME -->` is saved as NAME (the page asks the reader to save
it); one after `<!-- not run ... -->` is skipped (installing); every other bash or python
block runs and must succeed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

GUIDE = REPO / "docs" / "getting-started.md"
BLOCK = re.compile(r"(?:<!-- (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)


def blocks() -> list[tuple[str, str, str]]:
    """(marker, language, body) of every fenced block, in order."""
    text = GUIDE.read_text(encoding="utf-8")
    return [(m["marker"] or "", m["lang"], m["body"]) for m in BLOCK.finditer(text)]


def test_the_guide_marks_what_it_saves_and_what_it_skips() -> None:
    found = blocks()
    saved = [marker.removeprefix("file: ") for marker, _, _ in found if marker.startswith("file:")]
    assert saved == ["make_mydata.py", "my-data.yaml", "look.py", "train.py"]
    assert [lang for marker, lang, _ in found if marker.startswith("not run")] == ["bash"]


def test_the_getting_started_guide_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("torch")  # the training loop's; README's test install has it
    shutil.copytree(REPO / "sample_data" / "tokenizer", tmp_path / "sample_data" / "tokenizer")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),  # this checkout's curate, for python and the curate command
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    ran = []
    for marker, lang, body in blocks():
        if marker.startswith("file: "):
            (tmp_path / marker.removeprefix("file: ")).write_text(body, encoding="utf-8")
            continue
        if marker.startswith("not run") or lang not in ("bash", "python"):
            continue
        command = ["bash", "-euo", "pipefail", "-c", body] if lang == "bash" else [
            sys.executable, "-c", body
        ]  # fmt: skip
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        assert done.returncode == 0, f"{body}\n{done.stdout}\n{done.stderr}"
        ran.append(body.strip())
    assert ran == [
        "python make_mydata.py",
        "curate inspect-filter my-data.yaml --stage filter_length --sample 500",
        "curate run my-data.yaml",
        "python look.py",
        "python train.py",
    ]
    version = tmp_path / "curated" / "my-data" / "v1"
    assert (version / "manifest.json").is_file() and (version / "validation").is_dir()
