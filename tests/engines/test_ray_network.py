"""README's "no network" promise holds for `engine: ray` with no address (issue 14).

A real `curate run` in a subprocess, under `strace -f` so that every process of the run is
recorded: the driver, and the Ray daemons it starts (gcs_server, raylet, the dashboard
process, its agents) and the workers they start. Every address a connect, sendto, sendmsg
or bind names must be loopback or a Unix/netlink socket, no process may talk to port 53
(a DNS query, even to a resolver on loopback), and every socket a process of the run
listens on (read from /proc while it runs) must be bound to loopback. Nothing is blocked
or patched: a namespace without network, or patched Python sockets, would hide the
attempts this test exists to see. One Ray start (~10 s).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, corpus, write_jsonl, write_recipe

pytest.importorskip("ray", reason="Ray is not installed: pip install 'curate[ray]'")
STRACE = shutil.which("strace")

CALLS = ("connect", "sendto", "sendmsg", "sendmmsg", "bind")
_CALL = re.compile(r"^(\d+)\s+(?:<\.\.\. )?(" + "|".join(CALLS) + r")\((.*)$")
_INET = re.compile(r'sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\)')
_INET6 = re.compile(r'sin6_port=htons\((\d+)\),.*?inet_pton\(AF_INET6, "([^"]+)"')
_FAMILY = re.compile(r"sa_family=(AF_[A-Z0-9]+)")
_EXEC = re.compile(r'^(\d+)\s+execve\("([^"]+)", \[(.*?)\]', re.M)


def loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def network_calls(trace: str) -> list[tuple[str, str, str, str | None, int | None]]:
    """(pid, call, family, address, port) for every address a call names in the trace."""
    found = []
    for line in trace.splitlines():
        m = _CALL.match(line)
        if not m or "resumed>" in line:
            continue
        pid, call, args = m.groups()
        for family in _FAMILY.findall(args):
            if family == "AF_INET":
                inet = _INET.search(args)
                assert inet, line
                found.append((pid, call, family, inet.group(2), int(inet.group(1))))
            elif family == "AF_INET6":
                inet6 = _INET6.search(args)
                assert inet6, line
                found.append((pid, call, family, inet6.group(2), int(inet6.group(1))))
            else:
                found.append((pid, call, family, None, None))
    return found


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(root: int) -> set[int]:
    tree, out, todo = _children(), set(), [root]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo.extend(tree.get(pid, []))
    return out


def _hex_address(text: str) -> str:
    raw = bytes.fromhex(text)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))  # per-word host order
    return str(ipaddress.IPv6Address(words))


def listening(pids: set[int]) -> set[tuple[str, str, int]]:
    """(process name, local address, port) of every TCP socket these processes listen on."""
    inodes: dict[str, str] = {}
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = name
        except OSError:
            continue
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and inode in inodes:  # TCP_LISTEN
                host, port = local.split(":")
                out.add((inodes[inode], _hex_address(host), int(port, 16)))
    return out


@pytest.mark.skipif(STRACE is None, reason="strace is not installed (apt-get install strace)")
def test_a_local_ray_cluster_stays_on_loopback(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(400))
    recipe = write_recipe(
        tmp_path,
        partition_size="4KB",
        stages=[{"normalize": {}}, {"filter_length": {"min_words": 3}}, {"exact_dedup": {}}],
        engine={"kind": "ray", "workers": 2},
    )
    temp = tempfile.mkdtemp(prefix="ray-")  # short: Ray's socket paths must stay < 108 bytes
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        RAY_AUTH_MODE="disabled",
        RAY_TMPDIR=temp,
    )
    trace_file = tmp_path / "trace.txt"
    command = [STRACE, "-f", "-qq", "-s", "256", "-e", "trace=%network,execve", "-o",
               str(trace_file), sys.executable, "-m", "curate.cli", "run", "--quiet", str(recipe)]  # fmt: skip
    listeners: set[tuple[str, str, int]] = set()
    niceness: dict[int, int] = {}  # per Ray worker process seen
    try:
        with subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as proc:  # fmt: skip
            deadline = time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                pids = _descendants(proc.pid)
                listeners |= listening(pids)
                niceness.update(_worker_niceness(pids))
                time.sleep(0.3)
            out, err = proc.communicate(timeout=30)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert proc.returncode == 0, err[-3000:]
    assert "wrote t v1" in out
    trace = trace_file.read_text(errors="replace")

    # every process of the run was traced: Ray's daemons are in the trace, with network calls
    execs = {pid: (path, argv) for pid, path, argv in _EXEC.findall(trace)}
    names = {pid: Path(path).name for pid, (path, _) in execs.items()}
    dashboard = {pid for pid, (_, argv) in execs.items() if "dashboard/dashboard.py" in argv}
    assert {"gcs_server", "raylet"} <= set(names.values()), sorted(set(names.values()))
    assert dashboard, "Ray's dashboard process is not in the trace"
    workers = {pid for pid, (_, argv) in execs.items() if "default_worker.py" in argv}
    assert workers, "no Ray worker is in the trace"
    calls = network_calls(trace)
    assert {pid for pid, *_ in calls} & (dashboard | workers), "no daemon's network calls"

    outside = [c for c in calls if c[3] is not None and not loopback(c[3])]
    assert not outside, f"non-loopback addresses: {sorted(set(outside))[:20]}"
    dns = [c for c in calls if c[4] == 53]
    assert not dns, f"DNS queries: {dns[:10]}"
    families = {c[2] for c in calls}
    assert families <= {"AF_UNIX", "AF_NETLINK", "AF_INET", "AF_INET6", "AF_UNSPEC"}, families
    binds = [c for c in calls if c[1] == "bind" and c[3] is not None]
    assert binds, "no TCP/UDP bind was traced"

    assert {name for name, _, _ in listeners} >= {"gcs_server", "raylet"}, listeners
    wide = [entry for entry in listeners if not loopback(entry[1])]
    assert not wide, f"listening beyond loopback: {sorted(wide)}"
    assert json.loads((tmp_path / "out" / "t" / "v1" / "manifest.json").read_text())["counts"]
    # the workers run at the local engine's priority (this process's, which the driver and
    # the cluster it starts inherit: 0 unless the suite runs under `nice`), not Ray's
    # default of 15 more
    assert niceness and set(niceness.values()) == {os.nice(0)}, niceness


def _worker_niceness(pids: set[int]) -> dict[int, int]:
    out = {}
    for pid in pids:
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
            if line.startswith(b"ray::"):  # a worker, once it took its title (and niceness)
                out[pid] = os.getpriority(os.PRIO_PROCESS, pid)
        except OSError:  # ended meanwhile
            continue
    return out
