"""Where a Ray run's tasks ran: one marker file per task, named by its node.

A team that adds a node to its cluster wants to see that the node took work, and the
manifest should say which machines made a version (`engine.nodes`: per node, the partition
tasks and the decide tasks it ran). Ray keeps a record of where tasks ran, but reading it
(`ray.util.state`) needs the dashboard, which `curate[ray]` does not install and the local
engine start leaves off. So each task leaves a marker in the staging folder, which
every node mounts, named `<kind>.<node id>.<random>` and holding the node's address: one
small write per task, no message to the driver, no object it has to own; a task Ray runs
twice (its worker died) is counted twice, as the work it was. The markers go with the
staging folder at publish.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

KINDS = ("partition", "decide")
"""A pass's task over one partition; a task of a barrier's decision (every collective step)."""


def note(folder: Path | None, kind: str) -> None:
    """Called in a Ray worker: leave this task's marker, holding the node's address
    (nothing without a folder)."""
    if folder is None:
        return
    import ray

    node = ray.get_runtime_context().get_node_id()
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / f"{kind}.{node}.{uuid.uuid4().hex[:12]}"
    marker.write_text(ray.util.get_node_ip_address())


def tally(folder: Path) -> list[dict[str, Any]]:
    """Per node that ran a task (sorted by node id): its address and the tasks of each
    kind. Reads the markers alone, so it works after the driver left the cluster."""
    counts: dict[str, Counter[str]] = {}
    address: dict[str, str] = {}
    for marker in sorted(folder.iterdir()) if folder.is_dir() else ():
        kind, _, rest = marker.name.partition(".")
        node = rest.partition(".")[0]
        if kind in KINDS and node:
            counts.setdefault(node, Counter())[kind] += 1
            address.setdefault(node, marker.read_text().strip())
    return [
        {"node": node, "address": address[node], **{f"{k}_tasks": c[k] for k in KINDS}}
        for node, c in sorted(counts.items())
    ]
