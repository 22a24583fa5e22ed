"""Issue 20 pt 4 when the inputs change after a forget: `--where` and the purge find the
forgotten documents in an earlier version by the ids the inputs gave them when it was built
(kept in the exclusions, matched by each input's size and mtime in its manifest), not by
the ids today's inputs give them: a line inserted before them shifts their derived ids, and
a removed input is read by no later build or forget."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from test_forget import NAME, corpus, ids_in, recipe_in, shard_sums
from test_purge import cli, holding

import curate
from curate.forget.where import holders
from curate.forget_command import Selection, forget
from curate.store import Store
from curate.verify import verify


def test_edited_and_removed_inputs_do_not_hide_them(tmp_path: Path) -> None:
    corpus(tmp_path)
    original = tmp_path / "original"
    shutil.copytree(tmp_path / "data", original)
    recipe = recipe_in(tmp_path)
    v1 = curate.run(recipe)
    old = ids_in(v1)
    v1.release()
    forget(recipe, Selection(match=re.compile(NAME)), "request 1")  # v2: d5, d33 (a), d61 (b)

    # a line inserted at the top of a.jsonl (every derived id in it shifts), b.jsonl removed,
    # and a build (v3) that reads a.jsonl again
    a = tmp_path / "data" / "a.jsonl"
    a.write_text('{"text": "A note added on top"}\n' + a.read_text())
    (tmp_path / "data" / "b.jsonl").unlink()
    curate.run(recipe).release()
    store = tmp_path / "out" / "t"
    found = holders(store)
    lineage = {h.owner: h.documents for h in found if h.path.name == "documents.arrow"}
    assert lineage == {"v1": 3}, found  # by the ids a.jsonl and b.jsonl gave them then
    assert not [h for h in found if h.kind == "unknown"]

    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "t/v1: rewritten without 3" in out.stdout, out.stdout
    assert holding(store, b"Quimby") == []
    assert [h for h in holders(store) if h.kind == "version"] == []
    # v1 rewritten equals a build of its own inputs with the exclusions
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copytree(original, fresh / "data")
    exclusions = (store / ".forget" / "exclusions.json").read_text()
    Store(fresh / "out", "t").save_own(".forget", "exclusions.json", exclusions)
    assert shard_sums(curate.run(recipe_in(fresh))) == shard_sums(curate.open(store, "v1"))
    assert len(old - ids_in(curate.open(store, "v1"))) == 3

    # a second request, after a.jsonl changed: v1 was built from a.jsonl as it was, which no
    # one searched for note 12, so its id there is not known: --where says so, the purge
    # removes v1; v3, built from a.jsonl as it is, is rewritten without it
    forget(recipe, Selection(match=re.compile(r"^Note 12 ")), "request 2")  # v4
    out = cli("forget", str(store), "--where")
    assert out.returncode == 0, out.stderr
    assert any("/v1: may hold forgotten documents" in line and "data/a.jsonl" in line
               for line in out.stdout.splitlines()), out.stdout  # fmt: skip
    assert {h.owner for h in holders(store) if h.path.name == "documents.arrow"} == {"v3"}
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (store / "v1").exists() and (store / "v3").exists(), out.stdout
    assert [h for h in holders(store) if h.kind in ("version", "unknown")] == []
    for version in (p for p in store.iterdir() if re.fullmatch(r"v\d+", p.name)):
        assert verify(version) == [], version
    assert curate.run(recipe).up_to_date


def test_a_rewrite_that_keeps_size_and_mtime(tmp_path: Path) -> None:
    """An input rewritten with its size and mtime kept (two lines swapped, the mtime set back)
    is another input: the ids a forget finds in it now are not v1's, so `--where` does not
    take them for v1's (it says v1 may hold forgotten documents) and the purge removes v1
    rather than rewriting it without the wrong ones."""
    corpus(tmp_path)
    recipe = recipe_in(tmp_path)
    curate.run(recipe).release()
    a = tmp_path / "data" / "a.jsonl"
    st = a.stat()
    lines = a.read_text().splitlines(keepends=True)
    lines[33], lines[34] = lines[34], lines[33]  # d33, which names the person, moves down
    a.write_text("".join(lines))
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (a.stat().st_size, a.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    forget(recipe, Selection(match=re.compile(NAME)), "request")  # v2, from a.jsonl as it is
    store = tmp_path / "out" / "t"
    found = holders(store)
    assert {h.owner for h in found if h.kind == "unknown"} == {"v1"}, found
    assert {h.owner for h in found if h.path.name == "documents.arrow"} == {"v1"}  # b.jsonl's
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (store / "v1").exists(), out.stdout
    assert holding(store, b"Quimby") == []
    assert [h for h in holders(store) if h.kind in ("version", "unknown")] == []
    for version in (p for p in store.iterdir() if re.fullmatch(r"v\d+", p.name)):
        assert verify(version) == [], version
    assert curate.run(recipe).up_to_date
