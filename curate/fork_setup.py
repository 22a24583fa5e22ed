"""Which stages the driver sets up before the local engine forks its workers.

A stage whose setup forked workers can share (`setup_shared_by_fork`: the pii stage's
Presidio, about 1.4 CPU seconds per process) is set up in the driver just before the
fork, so every worker inherits it instead of building its own. That is pure cost when no
partition runs the stage: a rerun that changed only a later stage (the tokenizer)
replays every partition's pii output from the stage cache, and the driver's setup sat on
its critical path (issue 17: the tokenizer rerun took 1.27x the tokenize step alone,
1.12x before the driver set pii up).

Which partitions replay is known only once the passes before run (their keys chain from
decisions), but what those keys depend on is known before: when the inputs (every
partition's content digest, known before the run for files an earlier build hashed and
that did not change), the recipe's data keys, the exclusions and every stage up to the
last shared one are those of an earlier build of this dataset that kept a stage cache,
the stage's entries have the same keys as that build's. Each such build records that
prefix's key in `.cache/setups.json` (from the digests its first pass took, so a cold
build records it for the next); a build whose prefix is recorded leaves the setup
to a worker that turns out to need it (an entry evicted or damaged since). A wrong guess
costs CPU seconds, never a different byte: the file is a hint, not a record of data.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from curate.cache import keys
from curate.errors import CurateError
from curate.stages.base import Stage

if TYPE_CHECKING:
    from curate.engines.base import Engine
    from curate.engines.job import Job
    from curate.staging.record import PartitionRecord
    from curate.store import Store

log = logging.getLogger(__name__)

FILE = (".cache", "setups.json")
KEEP = 32  # prefixes remembered: a few recipes sharing a dataset folder, each a few edits
_KEY = re.compile(r"^[0-9a-f]{32}$")


def _shares(stage: Stage) -> bool:
    return bool(getattr(stage, "setup_shared_by_fork", False))


def shared(stages: Sequence[Stage]) -> list[Stage]:
    return [s for s in stages if _shares(s)]


def prefix_key(
    job: Job, stages: Sequence[Stage], exclusions: Sequence[object], digests: dict[str, str]
) -> str | None:
    """The key of what the shared stages' outputs depend on, or None when it is not known
    (no stage cache, no shared stage, a partition whose content digest is not in `digests`:
    before the run, one not hashed yet, new or changed, so it runs every stage anyway)."""
    plan = job.cache
    at = [i for i, s in enumerate(stages) if _shares(s)]
    if plan is None or not at or not plan.keys:
        return None
    held = [(p.key, digests.get(p.key)) for p in job.partitions]
    if any(d is None for _, d in held):
        return None
    identities = [keys.stage_identity(s) for s in stages[: at[-1] + 1]]
    return keys.chain("fork-setup", plan.keys[0].data, held, identities, list(exclusions))


def digests_read(records: Sequence[PartitionRecord]) -> dict[str, str]:
    """Each partition's content digest, as the first pass's records give it."""
    return {r.partition: r.digest for r in records if r.digest is not None}


def recorded(store: Store, key: str | None) -> bool:
    return key is not None and key in _read(store)


def remember(store: Store, key: str | None) -> None:
    """Note that a build with this prefix kept its stage cache (after it ran)."""
    if key is None:
        return
    read = _read(store)
    if read[-1:] == [key]:  # the latest already: nothing to write (a rerun of the same prefix)
        return
    known = [k for k in read if k != key]
    try:
        store.save_own(*FILE, json.dumps([*known[-(KEEP - 1) :], key]))
    except (OSError, CurateError) as exc:  # only a hint: never a reason to fail a build
        log.debug("%s not saved: %s", "/".join(FILE), exc)


def set_up_before_fork(engine: Engine, stages: Sequence[Stage], replayed: bool) -> None:
    """Set up the shared stages in the driver when the engine is about to fork workers
    (`tasks.ready` finds them set up in each worker), unless their outputs will be replayed."""
    forks = getattr(engine, "forks", None)
    todo = shared(stages)
    in_workers = getattr(engine, "set_up_in_workers", None)  # Ray's: no fork to inherit by
    if todo and in_workers is not None and not replayed:
        in_workers(todo)
    if not todo or forks is None or not forks():
        return
    if replayed:
        log.debug("not setting up %s before the fork: an earlier build cached their output",
                  ", ".join(s.name for s in todo))  # fmt: skip
        return
    from curate.engines.tasks import ready

    for stage in todo:
        ready(stage)


def set_up_for_examples(
    engine: Engine, stages: Sequence[Stage], replayed: bool, examples: int
) -> threading.Thread | None:
    """On an engine that does not fork (Ray's), set the pii stages up in the driver now, in
    a thread, while it waits on the workers: the examples it writes after the last pass go
    through them (`examples.privacy`), and set up then, Presidio stood on the run's wall
    time after the engine (the sample recipe on Ray: examples 2.0 s, 0.33 s on the local
    engine, whose forked workers share the driver's set-up). The build joins the thread
    before writing the examples; a stage that fails here fails there, with its own error.
    None when there is nothing to do: a forking engine, no examples, or replayed outputs
    (whose examples' texts were shown before and are cached)."""
    if getattr(engine, "forks", None) is not None or replayed or not examples:
        return None
    from curate.examples.privacy import Redactor

    todo = [stage for _, stage in Redactor(shared(stages)).stages]
    if not todo:
        return None

    def set_up() -> None:
        from curate.engines.tasks import ready

        with contextlib.suppress(Exception):
            for stage in todo:
                ready(stage)

    thread = threading.Thread(target=set_up, name="curate-examples-setup", daemon=True)
    thread.start()
    return thread


def _read(store: Store) -> list[str]:
    try:
        text = store.read_own(*FILE)
        data = json.loads(text) if text else []
    except (CurateError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [k for k in data if isinstance(k, str) and _KEY.fullmatch(k)]
