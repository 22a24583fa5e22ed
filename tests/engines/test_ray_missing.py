"""Ray engine start-up problems say in one line what to do: install Ray, or start a cluster."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
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


def test_an_address_where_nobody_listens_fails_in_seconds_before_writing(project: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on: bound, then released
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    recipe = write_recipe(project, engine={"kind": "ray", "address": f"127.0.0.1:{port}"})
    out = subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", "--quiet", str(recipe)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    message = out.stderr.strip()
    assert message.startswith(f"error: no Ray cluster answers at 127.0.0.1:{port}"), message
    assert "ray start --head" in message and "Traceback" not in message
    assert not (project / "out").exists()


def test_ray_addresses_are_checked_for_shape() -> None:
    from curate.engines.ray.connect import host_port
    from curate.errors import CurateError

    assert host_port("auto") is None and host_port(None) is None
    assert host_port("ray://head:10001") is None
    assert host_port("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert host_port("[::1]:6379") == ("::1", 6379)
    with pytest.raises(CurateError, match="not host:port"):
        host_port("head")
