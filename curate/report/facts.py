"""What a report shows of one version, gathered from its folder alone.

Everything comes from the manifest and the statistics file it lists (`curate.stats`;
without one, the quarantine files' reason column), never from the inputs, so a report
of any size takes seconds. The manifest holds no document
text by design (`curate.manifest`), and reasons are a fixed vocabulary
(`curate.reasons`); the page escapes every value all the same.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from curate.errors import CurateError
from curate.paths import inside

if TYPE_CHECKING:
    from curate.version import Version


@dataclass(frozen=True)
class Step:
    """One bar of the funnel: documents (and tokens, when known) after a step."""

    label: str
    documents: int


@dataclass
class Facts:
    """One version as the report draws it."""

    dataset: str
    version: str
    fingerprint: str
    manifest: dict[str, Any]
    funnel: list[Step]
    removed: list[tuple[str, str, int]]  # (stage label, reason, documents), in stage order
    quarantine: list[tuple[str, int]]  # (reason, records), commonest first
    statistics: dict[str, Any] | None = None
    labels: dict[int, str] = field(default_factory=dict)  # stage position -> its label
    examples: list[dict[str, Any]] = field(default_factory=list)  # curate.examples.files rows

    @property
    def title(self) -> str:
        return f"{self.dataset} {self.version}"


def stage_label(stage: dict[str, Any]) -> str:
    """How the report names a stage: its position and name (`3 quality_filter`)."""
    return f"{stage['position']} {stage['name']}"


def gather(version: Version) -> Facts:
    m = version.manifest
    counts = m["counts"]
    stats = statistics(version)
    funnel = [Step("read", counts["read"]), Step("readable", counts["documents"])]
    funnel += [Step(stage_label(s), s["docs_out"]) for s in m["stages"]]
    removed = [
        (stage_label(s), reason, n)
        for s in m["stages"]
        for reason, n in sorted(s["removed"].items())
        if n
    ]
    return Facts(
        dataset=version.dataset,
        version=version.name,
        fingerprint=version.fingerprint,
        manifest=m,
        funnel=funnel,
        removed=removed,
        quarantine=_quarantine(version, stats) if counts["quarantined"] else [],
        statistics=stats,
        labels={s["position"]: stage_label(s) for s in m["stages"]},
        examples=version.examples().to_pylist(),
    )


def statistics(version: Version) -> dict[str, Any] | None:
    """The version's statistics file as its manifest lists it (None: made without one, or
    by a curate before statistics). The version was opened checked: the file is there, its
    own, of its listed size; its path must stay inside the version."""
    listed = version.manifest.get("statistics")
    if not isinstance(listed, dict):
        return None
    source = version.path / "manifest.json"
    path = inside(version.path, listed.get("path"), source=source, field="statistics.path")
    data = json.loads(path.read_bytes())
    if not isinstance(data, dict) or data.get("format") != "curate.statistics":
        raise CurateError(f"{path} is not a curate statistics file; `curate verify` checks it")
    return data


def _quarantine(version: Version, stats: dict[str, Any] | None) -> list[tuple[str, int]]:
    """Quarantine reasons and their counts, commonest first (ties by reason): from the
    statistics, or counted from the quarantine files' reason column."""
    if stats is not None and "quarantine" in stats:
        reasons = Counter(stats["quarantine"])
    else:
        reasons = Counter(version.quarantined().column("reason").to_pylist())
    return sorted(reasons.items(), key=lambda item: (-item[1], item[0]))


def rules(manifest: dict[str, Any]) -> dict[int, list[str]]:
    """Per stage position, the rules it applies in order (a quality filter's details)."""
    found = {}
    for stage in manifest["stages"]:
        listed = stage.get("details", {}).get("rules")
        if isinstance(listed, list):
            found[stage["position"]] = [str(r) for r in listed]
    return found


def tokenizer(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The tokenizer a tokenize or chat_template stage recorded (source, files and their
    sha256, vocabulary, special tokens, policy), flattened to dotted keys, with the stage."""
    from curate.explain import flatten

    for stage in manifest["stages"]:
        details = stage.get("details", {})
        for key in ("tokenizer", "chat_template"):
            if isinstance(details.get(key), dict):
                return {"stage": stage_label(stage)} | flatten(details[key])
    return None
