"""Reaching the Ray cluster a recipe names, with one line when nobody answers there.

`ray.init(address="host:port")` against a host where no Ray head listens retries for
minutes before raising a `ConnectionError` traceback, and `address="auto"` with no cluster
on this machine raises one at once. A user who mistyped an address, or forgot `ray start
--head`, should learn that in seconds, before anything is written: the runner calls
`check_reachable` (a plain TCP connection to a `host:port` address) when it chooses the
engine, and `init` turns Ray's own `ConnectionError` into a `CurateError` saying how to
start a cluster.
"""

from __future__ import annotations

import logging
import socket
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
