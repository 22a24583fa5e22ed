"""Reaching the Ray cluster a recipe names, with one line when nobody answers there.

`ray.init(address="host:port")` against a host where no Ray head listens retries for
minutes before raising a `ConnectionError` traceback, and `address="auto"` with no cluster
on this machine raises one at once. A user who mistyped an address, or forgot `ray start
--head`, should learn that in seconds, before anything is written: the runner calls
`check_reachable` (a plain TCP connection to a `host:port` address) when it chooses the
engine, and `init` turns Ray's own `ConnectionError` into a `CurateError` saying how to
start a cluster.

With no address, `start_local` starts a Ray instance of this machine's own and keeps it
inside the machine (README: "no network"). Ray's defaults do not: its dashboard process
(started even with `include_dashboard=False`, for its usage-stats module) probes the cloud
metadata addresses (169.254.169.254, and resolves `metadata.google.internal`) whether or
not usage stats are enabled; every process finds its "node IP" by a UDP connect towards
8.8.8.8; and gcs_server, raylet and the workers listen on all interfaces, because Ray
rewrites a loopback node address to the routable one unless it is in single-machine
mode. tests/engines/test_ray_network.py runs a real run under `strace -f` and checks
every address every process names.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from curate.errors import CurateError

HOW = (
    "start a head with `ray start --head` (workers join with `ray start --address=<head>:6379`)"
    ", or leave the address out to run on a Ray instance of this machine's own"
)


def host_port(address: str | None) -> tuple[str, int] | None:
    """The (host, port) of a `host:port` address; None for "auto", none, or a ray:// URL."""
    if not address or address == "auto" or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise CurateError(f"Ray address {address!r} is not host:port, auto or ray://host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


def check_reachable(address: str | None, timeout: float = 10.0) -> None:
    """Fail in seconds, with one line, when nothing listens at a `host:port` address."""
    target = host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CurateError(f"no Ray cluster answers at {address} ({reason}): {HOW}") from None


def init(address: str | None, **options: Any) -> None:
    """`ray.init`, with a missing cluster reported as a CurateError."""
    import ray

    try:
        ray.init(address=address, logging_level=logging.WARNING, **options)
    except ConnectionError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "no cluster found"
        raise CurateError(
            f"cannot reach a Ray cluster at {address or 'auto'} ({first}): {HOW}"
        ) from None


LOOPBACK = "127.0.0.1"
DEAD_PROXY = "http://127.0.0.1:9"
"""Where Ray's daemons send plain HTTP to an address outside this machine: a loopback port
(discard) that nobody serves, so the dashboard's cloud-metadata probes fail at once, on
loopback, without a DNS query (a proxied request does not resolve its host)."""
NOT_PROXIED = "127.0.0.1,localhost,::1"

LOCAL_ENVIRONMENT = {
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage reports
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # single-machine mode: the node IP is loopback
    **{name: DEAD_PROXY for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY")},
    **{name: NOT_PROXIED for name in ("no_proxy", "NO_PROXY")},  # Ray's own gRPC and HTTP
    "RAY_worker_niceness": "0",  # Ray's default, 15, loses every core to any other load
}
"""The environment Ray's daemons (and the workers they start) inherit from `start_local`.
The workers run at the priority the local engine's do: at Ray's default (nice 15) a run on
a machine with other work slowed down where the same run on the local engine did not."""


def start_local(**options: Any) -> None:
    """A Ray instance on this machine, on loopback only: no dashboard, no usage reports,
    gcs_server, raylet and workers bound to 127.0.0.1, nothing sent beyond the machine.

    The environment is set while `ray.init` starts the daemons, which inherit it, and
    restored afterwards, so the caller's process keeps its own. Ray decides whether a
    loopback node address may stand from a module constant it reads at import
    (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`), so the driver's copy is set for the same span.
    """
    from ray._private import ray_constants

    with _environment(LOCAL_ENVIRONMENT), _attribute(ray_constants, "ENABLE_RAY_CLUSTER", False):
        init(None, include_dashboard=False, _node_ip_address=LOOPBACK, **options)


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _attribute(owner: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)
