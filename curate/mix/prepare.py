"""`curate mix` and `curate.prepare("mixture.yaml")`: the mixture version, built when missing.

The no-op path is the recipes' (`curate.runner`): each recipe source is found up to date by
`curate.run` (stat of its inputs, one index file, its manifest), the mixture's fingerprint
is hashed from the mixture file and its sources' fingerprints, and the store's index names
the published version, whose files are stat-ed. Nothing is hashed or read beyond that, so
every rank of a job may call it before it trains. A build happens under the fingerprint's
lock: callers that arrive meanwhile wait, then find the version it published.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import curate
from curate.errors import CurateError
from curate.mix.spec import Mixture
from curate.store import Store
from curate.version import Version

FORMAT = 1


def load(mixture: Mixture | str | os.PathLike[str]) -> Mixture:
    return mixture if isinstance(mixture, Mixture) else Mixture.load(Path(mixture))


def is_mixture_file(path: str | os.PathLike[str]) -> bool:
    """Whether a YAML file is a mixture (it lists `sources:` and a `budget:`), not a recipe.

    Asked on every `prepare()`, before the recipe is loaded (and parsed again, with lines
    for its errors): a file that does not even hold both words is no mixture, and one
    that does is parsed with libyaml's parser when PyYAML has it. Parsing a recipe in pure
    Python here cost each up-to-date `prepare()` about a millisecond (of 10, on 1,000
    shards), more for a recipe with many comments.
    """
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "sources" not in text or "budget" not in text:
        return False
    from curate.yaml_lines import LOADER

    try:
        data = yaml.load(text, Loader=LOADER)  # a safe loader, libyaml's when there is one
    except (yaml.YAMLError, RecursionError):
        return False
    return isinstance(data, dict) and "sources" in data and "budget" in data


def fingerprint(mixture: Mixture, built: dict[int, Version]) -> str:
    """Of what decides the mixture's bytes: the mixture file (its output settings aside) and
    each source's identity (a built recipe's by the version it gave)."""
    sources = []
    for i, spec in enumerate(mixture.sources):
        v = built.get(i)
        sources.append(
            [spec.label, spec.dataset, spec.version, spec.fingerprint, spec.split]
            if v is None
            else [spec.label, v.dataset, v.name, v.fingerprint, spec.split]
        )
    payload = {
        "format": FORMAT,
        "curate": curate.__version__,
        "mixture": mixture.model_dump(mode="json", exclude={"output": {"fsync"}}),
        "sources": sources,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def store_of(mixture: Mixture) -> Store:
    return Store(
        mixture.output_root(),
        mixture.name,
        dir_mode=int(mixture.output.dir_mode, 8),
        file_mode=int(mixture.output.file_mode, 8),
    )


def prepare(mixture: Mixture | str | os.PathLike[str]) -> Version:
    """The mixture version for this mixture file and its sources, built now when missing."""
    from curate.mix.sources import build_recipes
    from curate.recipe_run import published

    mixture = load(mixture)
    built = build_recipes(mixture)
    fp = fingerprint(mixture, built)
    store = store_of(mixture)
    found, _ = published(store, fp, "sizes")
    if found is not None:
        return _found(store, fp, found)
    return _build(mixture, store, fp, built)


def _found(store: Store, fp: str, found: Version) -> Version:
    """The mixture published for this fingerprint, as the recipes' runs find theirs: a crash
    between its rename and LATEST's update (or before its staging folder went) is repaired
    here, at the cost of one folder listing when nothing is amiss."""
    store.repair_latest()
    store.drop_leftover_staging(fp)
    return found


def _build(mixture: Mixture, store: Store, fp: str, built: dict[int, Version]) -> Version:
    from curate.mix.publish import publish_mixture
    from curate.mix.sources import open_sources
    from curate.recipe_run import published

    sources = open_sources(mixture, built)  # refused sources fail before anything is written
    try:
        store.ensure()
        with store.lock(fp):
            found, _ = published(store, fp, "sizes")  # published by another caller meanwhile
            if found is not None:
                return _found(store, fp, found)
            try:
                return publish_mixture(mixture, store, fp, sources)
            except CurateError:
                store.discard(store.staging_name(fp))
                raise
    finally:
        for s in sources:
            if s.version is not built.get(mixture.sources.index(s.spec)):
                s.version.release()
