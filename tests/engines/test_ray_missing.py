"""Without Ray installed, choosing the ray engine says in one line how to install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import write_recipe

MESSAGE = "error: engine 'ray' needs Ray: pip install 'curate[ray]'"


def curate_without_ray(*args: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\nsys.modules['ray'] = None  # as if not installed\n"
        f"from curate.cli import main\nsys.argv = ['curate', *{list(args)!r}]\nmain()"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_ray_engine_without_ray_says_how_to_install(project: Path) -> None:
    on_ray = write_recipe(project, engine={"kind": "ray", "address": "auto"})
    out = curate_without_ray("run", "--quiet", str(on_ray))
    assert (out.returncode, out.stderr.strip()) == (2, MESSAGE)
    assert not (project / "out").exists()  # nothing written: no empty dataset folder
    local = write_recipe(project)  # the command line chooses the engine too
    for option in (["--engine", "ray"], ["--address", "auto"]):
        out = curate_without_ray("run", "--quiet", *option, str(local))
        assert (out.returncode, out.stderr.strip()) == (2, MESSAGE)
    out = curate_without_ray("run", "--quiet", "--engine", "local", str(local))
    assert out.returncode == 0, out.stderr
