"""When quarantined records mean the recipe is wrong, not the data: the limits that fail a run.

A `text_field` naming a field the records do not have quarantines every record; without
a limit the run publishes an empty version and exits 0, and a trainer calling
`curate.run` gets an empty dataset. So a run fails before publishing when more than
`on_error.max_quarantined` of its records (and more than `FLOOR`) were quarantined, or
when every record read was. It fails at once, after the first partition read, when every
record of that partition was quarantined for the same missing field or wrong type: that
is a setting, not a few bad lines, and finding it should cost seconds, not a whole run.

Messages name the reason, how many records it hit and which fields those records did
have: field names only, never values (`QuarantineRecord.fields`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from curate.errors import CurateError
from curate.io.batches import QuarantineRecord

if TYPE_CHECKING:  # the recipe imports this module: it stays light
    from curate.staging.record import PartitionRecord

FLOOR = 100
"""Quarantined records a run always tolerates: a few bad lines never fail a small run."""

_REASONS_KEPT = 32  # distinct reasons a partition record counts; the rest count as one
_OTHER = "(other reasons)"
_NAMES_KEPT = 20  # field names a partition record keeps per reason
_SHOWN = 3  # reasons a message names


class OnError(BaseModel):
    """What bad records do: set aside (within limits) or stop the run at the first one."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["quarantine", "fail"] = Field(
        "quarantine", description="Bad records: set aside in quarantine/, or stop the run."
    )
    max_quarantined: float = Field(
        0.1,
        ge=0,
        le=1,
        description=f"Fail before publishing when more than this share of the records read "
        f"(and more than {FLOOR}) were quarantined, or when every record was.",
    )
    stop_early: bool = Field(
        True,
        description="Stop as soon as a partition has quarantined every one of its records "
        "for the same missing field or wrong type.",
    )


def on_error_schema(schema: dict[str, Any]) -> None:
    """In the recipe's JSON schema, `on_error` is a mode or the mapping (`on_error: fail`)."""
    ref = schema.pop("$ref", None)
    modes = {"type": "string", "enum": ["quarantine", "fail"]}
    schema["anyOf"] = [modes, {"$ref": ref}] if ref else [modes, *schema.pop("anyOf", [])]


def tally(record: PartitionRecord, quarantined: list[QuarantineRecord]) -> None:
    """Count a partition's quarantined records by reason in its completion record, with the
    field names seen in records quarantined for a field (bounded: it is a small JSON file)."""
    if record.quarantine_reasons is None:
        record.quarantine_reasons = {}
    if record.fields_present is None:
        record.fields_present = {}
    reasons, present = record.quarantine_reasons, record.fields_present
    for q in quarantined:
        key = q.reason if q.reason in reasons or len(reasons) < _REASONS_KEPT else _OTHER
        reasons[key] = reasons.get(key, 0) + 1
        if q.fields is not None and key != _OTHER:
            names = present.setdefault(key, [])
            if len(names) < _NAMES_KEPT and not set(q.fields).issubset(names):
                names[:] = sorted(set(names) | set(q.fields))[:_NAMES_KEPT]


def check_partition(
    record: PartitionRecord, label: str | None = None, where: str | None = None
) -> None:
    """Fail now when this first-pass partition quarantined every one of its records for one
    missing field or wrong type (called when the policy stops early). `label` names the
    input in the message (`InputFile.label`), `where` the partition (default: its key)."""
    if record.read:
        return
    reasons = record.quarantine_reasons or {}
    present = record.fields_present or {}
    if len(reasons) != 1 or next(iter(reasons)) not in present:
        return
    reason, n = next(iter(reasons.items()))
    raise CurateError(
        f"{label or 'input ' + repr(record.input)}: all {n:,} records of partition "
        f"{where or record.partition} "
        f"were quarantined for {reason}{_fields(present[reason])}; nothing was published; "
        "check the recipe's text_field, id_field and fields against the input (if only some "
        "inputs lack it, set on_error.stop_early: false and raise on_error.max_quarantined)"
    )


def check_run(first_pass: list[PartitionRecord], policy: OnError) -> None:
    """Fail before publishing when the run quarantined more than the policy allows."""
    if policy.mode != "quarantine":
        return
    quarantined = sum(r.quarantined for r in first_pass)
    total = quarantined + sum(r.read for r in first_pass)
    everything = total > 0 and quarantined == total
    if not everything and quarantined <= max(FLOOR, policy.max_quarantined * total):
        return
    reasons: Counter[str] = Counter()
    present: dict[str, set[str]] = {}
    for r in first_pass:
        reasons.update(r.quarantine_reasons or {})
        for reason, names in (r.fields_present or {}).items():
            present.setdefault(reason, set()).update(names)
    top = [f"{reason} in {n:,}{_fields(present.get(reason))}"
           for reason, n in reasons.most_common(_SHOWN)]  # fmt: skip
    more = f", and {len(reasons) - _SHOWN} more reasons" if len(reasons) > _SHOWN else ""
    share = f"{policy.max_quarantined * 100:g}%"
    if everything:
        head = f"every one of the {total:,} records read was quarantined"
        fix = "check the recipe's text_field, id_field, fields or chat.shape against the input"
    else:
        head = (
            f"quarantined {quarantined:,} of {total:,} records, more than "
            f"on_error.max_quarantined allows ({share}, and at least {FLOOR})"
        )
        fix = "fix the inputs or the recipe, or raise on_error.max_quarantined"
    raise CurateError(f"{head}: {'; '.join(top)}{more}; nothing was published; {fix}")


def _fields(names: Any) -> str:
    if not names:
        return ""
    listed = sorted(names)[:_NAMES_KEPT]
    more = ", ..." if len(names) > _NAMES_KEPT else ""
    return f" (fields present: {', '.join(listed)}{more})"
