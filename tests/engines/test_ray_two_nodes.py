"""The Ray engine across two nodes: a head and a second node, each a `ray start` of its own.

Both nodes run on this machine (separate raylets with one CPU each, so two tasks at once
must go to different nodes), started as `ray start --block` processes and stopped by
their process ids: `ray stop` would stop every Ray process on the machine, another
session's included. The sample recipe runs across both; the manifest's `engine.nodes`
(markers each task leaves, `curate.engines.ray.placement`) must show partition tasks and
decide tasks on each node, and the shards must be the local engine's bytes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_ray_engine import files, sample_recipe

import curate
from curate.engines.ray import RayEngine
from curate.engines.ray.connect import LOCAL_ENVIRONMENT

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'curate[ray]'")

HERE = Path(__file__).resolve().parent
RAY = Path(sys.executable).with_name("ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """One `ray start --block`: the node lives as long as this process."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(RAY), "start", "--block", "--num-cpus=1", "--disable-usage-stats", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stopped with the daemons it started
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the node's `ray start` (it stops its daemons on exit), then its group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # anything of this node still running
    process.wait()


def node_ip() -> str:
    """The address Ray gives a node of this machine (the routable one: in a cluster of
    several nodes Ray rewrites a loopback address to it)."""
    from ray._private.services import get_node_ip_address

    return str(get_node_ip_address())


def listening(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=1):
            return True
    except OSError:
        return False


def alive_nodes() -> int:
    return sum(1 for n in ray.nodes() if n["Alive"])


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head and a second node on loopback, for every test here; yields the head's
    address, connected."""
    tmp_path = tmp_path_factory.mktemp("two-nodes")
    if not RAY.exists():
        pytest.fail(f"Ray's command-line tool is missing beside {sys.executable}")
    temp = tempfile.mkdtemp(prefix="ray2-")  # short: Ray's socket paths must stay < 108 bytes
    port = free_port()
    paths = [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    # No usage reports and no HTTP beyond the machine, as for the engine's own local
    # cluster; but a cluster of several nodes, so not single-machine mode (which would
    # keep the node address on loopback and refuse a second node).
    quiet = {k: v for k, v in LOCAL_ENVIRONMENT.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    env = {
        **os.environ,
        **quiet,
        "RAY_AUTH_MODE": "disabled",
        "PYTHONPATH": os.pathsep.join(paths),
    }
    ip = node_ip()
    local = [f"--node-ip-address={ip}", "--dashboard-agent-listen-port=0"]
    nodes = [
        start(
            ["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}", *local],
            env,
            tmp_path / "head.log",
        )
    ]
    address = f"{ip}:{port}"
    try:
        deadline = time.monotonic() + 120
        logs = [tmp_path / "head.log", tmp_path / "node.log"]

        def check() -> None:
            for n, log in zip(nodes, logs, strict=False):
                if n.poll() is not None:
                    pytest.fail(f"a Ray node stopped: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"Ray's two nodes were not up within 120 s ({logs})")

        while not listening(ip, port):
            check()
            time.sleep(0.5)
        nodes.append(start([f"--address={address}", *local], env, logs[1]))
        ray.init(address=address, log_to_driver=False)
        while alive_nodes() < 2:
            check()
            time.sleep(0.5)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for n in reversed(nodes):
            stop(n)
        shutil.rmtree(temp, ignore_errors=True)


def test_the_sample_recipe_runs_across_two_nodes(two_nodes: str, tmp_path: Path) -> None:
    on_ray = curate.run(sample_recipe(tmp_path, "ray"))
    ids = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    nodes = on_ray.manifest["engine"]["nodes"]
    assert {n["node"] for n in nodes} == ids  # both nodes, and only the cluster's
    for n in nodes:  # each node ran a partition of a pass and a step of a decision
        assert n["partition_tasks"] >= 1, nodes
        assert n["decide_tasks"] >= 1, nodes
        assert n["address"] == node_ip()
    ray.shutdown()  # the local engine's run needs no cluster
    local = curate.run(sample_recipe(tmp_path, "local"))
    assert "nodes" not in local.manifest["engine"]
    for key in ("shards", "rejected", "quarantine", "examples", "lineage"):
        assert files(on_ray, key) == files(local, key)


def test_a_connection_of_the_engines_own_is_shut_down_when_the_build_ends(two_nodes: str) -> None:
    """The engine closes after the last pass and shuts its own connection down in a thread
    (~0.3 s of waiting for the GCS, while the build publishes); the build closes it again
    once published, and that close returns with Ray shut down, as before."""
    ray.shutdown()  # the engine connects by address itself, as a `curate run` does
    engine = RayEngine(address=two_nodes, workers=1)
    engine.start()
    assert ray.is_initialized()
    engine.close()  # after the last pass
    engine.close()  # after publishing
    assert not ray.is_initialized()
    assert not [t for t in threading.enumerate() if t.name == "curate-ray-shutdown"]
