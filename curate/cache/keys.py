"""Cache keys: what a stage's output for one partition depends on, hashed as a chain.

A key names one point of one partition's way through the recipe:

    pass 0's input     H(partition key, its content digest, the recipe's data keys, reading code)
    pass k's input     H(the key of the rows barrier k-1 saw, this partition's decision digest)
    after map stage i  H(the key before it, the stage's identity)
    barrier k's basis  H(the key of the rows it saw, the basis identity)

A stage's identity is its name, class, parameters, context (but for the recipe's folder,
which only resolves relative paths: a copied or moved project keeps its cache), the software
its output depends on (library versions, a tokenizer's file digests) and the hash of its
code and of every curate module that code imports (`curate.cache.code`). The data keys are
the recipe's keys that reach the rows: `text_field`, `id_field`, `fields`, `chat`,
`on_error`, `partition_size`, `batch_size`, `max_document_bytes` -- never `split`,
`output.*` or `engine`, which change how rows are written or where the work runs, not the
rows. After a barrier the key holds the digest of the partition's decision rows rather than
the barrier's parameters: a decision that drops the same documents from a partition leaves
its entries valid whatever changed elsewhere (a new file that removes one old document re-
runs only that document's partition).

A barrier's basis has a second key, its **family** (`basis_family`): the same chain less
the earlier barriers' decisions,

    family of barrier k's basis  H(pass 0's input key, each map stage's identity and each
                                   earlier barrier's apply identity, in order, the basis
                                   identity)

A document's text where barrier k sees it depends on its partition's content and on the
stages before, never on which other documents an earlier decision dropped, when every
stage on the way works document by document (`per_document`); so a basis kept under one
decision holds the right row, by document id, for any other decision over the same
partition (`curate.cache.replay`: a file inserted before the others changes every old
partition's exact_dedup decision, and MinHash takes its old signatures by id).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from curate.cache.code import code_hash
from curate.io.batches import ID, ORDER
from curate.stages.base import BarrierStage, MapStage, Stage

ENTRY_FORMAT = 1
"""How entries are laid out (curate.cache.replay); raised when that changes, so old entries
are never read as new ones."""

DATA_KEYS = (
    "text_field", "id_field", "fields", "chat", "on_error", "partition_size", "batch_size",
    "max_document_bytes",
)  # fmt: skip


def chain(*parts: Any) -> str:
    """A 32-hex-digit key of the parts, in order (JSON of each, so types are kept apart)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def data_key(resolved_recipe: dict[str, Any]) -> str:
    """The recipe's keys that reach the rows, with the reading code's hash."""
    from curate import reading

    keys = {name: resolved_recipe.get(name) for name in DATA_KEYS}
    return chain("data", ENTRY_FORMAT, keys, code_hash(cast(type, reading.read_partition)))


def input_key(partition_key: str, digest: str, data: str) -> str:
    """Pass 0's input: the partition, what it holds, and how it is read."""
    return chain("input", partition_key, digest, data)


def after_barrier(rows_key: str, decision: str) -> str:
    """Pass k's input: the rows barrier k-1 saw, less what its decision dropped from them."""
    return chain("after", rows_key, decision)


def stage_identity(stage: Stage) -> str:
    """Everything about a map stage its output depends on."""
    return chain(
        "stage",
        stage.name,
        f"{type(stage).__module__}.{type(stage).__qualname__}",
        stage.params.model_dump(mode="json"),
        repr(replace(stage.context, base_dir=".")),  # where the recipe is: not what it does
        sorted(stage.software().items()),
        code_hash(type(stage)),
    )


def basis_identity(barrier: BarrierStage) -> str:
    """Everything about a barrier its summary basis depends on (MinHash: not the threshold)."""
    return chain(
        "basis",
        barrier.name,
        f"{type(barrier).__module__}.{type(barrier).__qualname__}",
        barrier.basis_params(),
        repr(replace(barrier.context, base_dir=".")),
        sorted(barrier.software().items()),
        code_hash(type(barrier)),
    )


def apply_identity(barrier: BarrierStage) -> str:
    """What a barrier's `apply` does to the rows it keeps (nothing, in every built-in one: it
    only drops), for the family keys after it: its class and code, not its parameters,
    which decide what it drops."""
    return chain("apply", f"{type(barrier).__module__}.{type(barrier).__qualname__}",
                 code_hash(type(barrier)))  # fmt: skip


def per_document(stage: Stage) -> bool:
    """Whether a stage's output for a document depends on that document alone, not on the
    others in its batch: true of curate's own stages; a user's stage is "a pure function of
    one batch" and may look at its neighbours, so no family key spans it."""
    return type(stage).__module__.startswith("curate.stages.")


def family_prefixes(
    passes: list[tuple[list[MapStage], BarrierStage | None]],
) -> list[str | None]:
    """Per pass, what its barrier's family key chains after pass 0's input key: the
    identities of every earlier pass's map stages and barrier `apply`; None for a pass whose
    barrier basis has no family (pass 0, whose rows no decision touched, and a pass after a
    decision whose maps or barrier may not work document by document)."""
    out: list[str | None] = []
    steps: list[Any] = []
    safe = True
    for k, (maps, barrier) in enumerate(passes):
        if k:
            safe = safe and all(per_document(stage) for stage in maps)
        usable = k > 0 and safe and barrier is not None and per_document(barrier)
        out.append(chain("family-prefix", steps) if usable else None)
        steps = [*steps, [stage_identity(stage) for stage in maps]]
        if barrier is not None:
            steps.append(apply_identity(barrier))
            # a barrier that changes the rows it keeps (line_dedup) makes them depend on its
            # decision, so no basis after it is the same under another decision
            safe = safe and not barrier.changes_rows()
    return out


def map_family_prefixes(
    passes: list[tuple[list[MapStage], BarrierStage | None]],
) -> list[str | None]:
    """Per pass, what the family key of its map stages' rows chains after pass 0's input key
    (`map_family`); None for pass 0 (no decision before it) and for a pass whose rows may
    depend on which documents an earlier decision dropped, or whose own map stages may
    look at a document's neighbours (a user's stage)."""
    out: list[str | None] = []
    steps: list[Any] = []
    safe = True
    for k, (maps, barrier) in enumerate(passes):
        if k:
            safe = safe and all(per_document(stage) for stage in maps)
        usable = k > 0 and safe and bool(maps)
        out.append(chain("map-family-prefix", steps) if usable else None)
        steps = [*steps, [stage_identity(stage) for stage in maps]]
        if barrier is not None:
            # nor across a barrier whose apply changes the rows it keeps (line_dedup): they
            # depend on its decision
            safe = safe and per_document(barrier) and not barrier.changes_rows()
            steps.append(apply_identity(barrier))
    return out


def map_family(origin: str, prefix: str, maps: tuple[str, ...]) -> str:
    """The family key of a pass's map stages' rows for one partition: the same chain as
    their entries' keys less the earlier barriers' decisions (see the module's docstring:
    a document's rows do not depend on them when every stage works document by document),
    which leads to the entries kept under any decision (`curate.cache.by_document`)."""
    return chain("map-family", origin, prefix, list(maps))


def basis_family(origin: str, prefix: str, maps: tuple[str, ...], basis: str) -> str:
    """The family key of a barrier's basis for one partition (see the module's docstring)."""
    return chain("basis-family", origin, prefix, list(maps), basis)


def after_stage(previous: str, identity: str) -> str:
    return chain("after-stage", previous, identity)


def decision_digest(path: Path) -> str:
    """What a barrier's decision drops from (or changes in) one partition: its rows, in id
    order (so the digest does not depend on how the decision's pieces were laid out);
    "none" when it drops nothing."""
    if not path.exists():
        return "none"
    from curate.output.shards import read_stream

    table = read_stream(path)  # `_order` is implied by the id; the rest (a barrier's
    table = table.select([n for n in table.column_names if n != ORDER])  # decision_fields) kept
    if table.num_rows == 0:
        return "none"
    table = table.take(pc.sort_indices(table, sort_keys=[(ID, "ascending")]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()
