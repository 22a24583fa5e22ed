"""`curate gc` keeps every version a live mixture draws from, and forgets the mixture once it
is gone; and opening a mixture holds its sources' read locks."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import corpus, writable, write_jsonl
from mix_fixtures import mixture_file, source_recipe

import curate
from curate.gc import collect
from curate.mix.prepare import prepare


def test_gc_keeps_the_sources_of_a_live_mixture(tmp_path: Path) -> None:
    source_recipe(tmp_path, "docs", 60)
    path = mixture_file(tmp_path, [{"recipe": "docs.yaml", "weight": 1}], budget=320)
    mixed = prepare(path)
    mixed.release()
    write_jsonl(tmp_path / "data" / "docs" / "b.jsonl", corpus(30, dup_every=0, prefix="new"))
    assert curate.run(tmp_path / "docs.yaml").name == "v2"  # v1 is no longer LATEST
    docs = tmp_path / "out" / "docs"
    kept = {a.path: a.outcome for a in collect(docs, keep=1)}
    assert kept["docs/v1"] == f"kept, the mixture {mixed.path} draws from it"
    assert (docs / "v1").is_dir()
    writable(mixed.path)  # the mixture is gone (removed by hand): nothing keeps v1 now
    shutil.rmtree(mixed.path)
    done = {a.path: a.outcome for a in collect(docs, keep=1)}
    assert done["docs/v1"] == "removed" and not (docs / "v1").exists()
    assert list((docs / ".mixtures").iterdir()) == []  # the stale entry went with it
