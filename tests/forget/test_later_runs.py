"""Issue 20 pt 3: after a purge, a later run (a new file) reads the inputs again, and the
forgotten documents enter it only as the dedup summaries its decision needs: no file under
the root holds their text or token sequence, not even the staging folder of a run killed
just before it publishes, and the version equals a rebuild that excludes them after
deduplication."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_end_to_end import (
    EMAIL,
    NAME,
    PERSON,
    TOKENIZER,
    cli,
    contains,
    make,
    run_killed_before_publishing,
    streams,
    text_of,
    texts_holding,
)
from tokenizers import Tokenizer

import curate
from curate.store import Store

NEEDLES = [NAME, EMAIL, "Fenwick"]


def shard_sums(version: curate.Version) -> list[tuple[str, str]]:
    return [(s["path"], s["sha256"]) for s in version.manifest["shards"]]


def test_a_later_run_holds_them_nowhere(tmp_path: Path) -> None:
    recipe = make(tmp_path)
    curate.run(recipe).release()
    store = tmp_path / "out" / "people"
    out = cli("forget", str(recipe), "--match", re.escape(EMAIL), "--reason", "DSR")
    assert out.returncode == 0, out.stderr
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr
    assert texts_holding(store, NEEDLES) == []
    tokens = (
        Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
        .encode(" " + NAME.split()[1], add_special_tokens=False)
        .ids
    )

    # a new file, with a copy of a forgotten document among new ones
    lines = [text_of(200 + i) for i in range(20)]
    lines[4] = f"Travel booked by {PERSON} on the 30th."
    (tmp_path / "in" / "three.jsonl").write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in lines)
    )
    run_killed_before_publishing(recipe, tmp_path / "phases.log")
    assert list(store.glob(".staging-*/pass-0/data-*.arrow"))  # what was staged is there
    assert texts_holding(store, NEEDLES) == []
    assert not any(contains(s, tokens) for s in streams(store))

    later = curate.run(recipe)
    assert texts_holding(store, NEEDLES) == []
    assert not any(contains(s, tokens) for s in streams(store))
    assert later.manifest["counts"]["removed"]["forget"] == {"forgotten": 4}

    # the same shards as a build from scratch with the same exclusions
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    make(fresh)
    (fresh / "in" / "three.jsonl").write_bytes((tmp_path / "in" / "three.jsonl").read_bytes())
    exclusions = (store / ".forget" / "exclusions.json").read_text()
    Store(fresh / "out", "people").save_own(".forget", "exclusions.json", exclusions)
    rebuilt = curate.run(fresh / "recipe.yaml")
    assert shard_sums(rebuilt) == shard_sums(later)


def test_a_cache_entry_never_lacks_a_forgotten_document(tmp_path: Path) -> None:
    """The pass after the one that dropped them keeps no entry: one kept would lack them, and
    a run without the exclusion (here: the file removed by hand) would replay it."""
    from test_forget import NAME as QUIMBY
    from test_forget import corpus, recipe_in

    from curate.forget_command import Selection, forget

    plain = tmp_path / "plain"
    corpus(plain)
    expected = shard_sums(curate.run(recipe_in(plain)))
    folder = tmp_path / "forgot"
    corpus(folder)
    recipe = recipe_in(folder)
    forget(recipe, Selection(match=re.compile(QUIMBY)), "r")  # its first build
    (folder / "out" / "t" / ".forget" / "exclusions.json").unlink()
    assert shard_sums(curate.run(recipe)) == expected


def test_two_barriers_both_see_them(tmp_path: Path) -> None:
    """With exact_dedup then minhash_dedup and no map stage between them, the first
    barrier's pass makes the second's summary of a forgotten document and drops it: forgetting
    d5 does not bring back d25, its near duplicate, a fresh build with the exclusions agrees,
    and a later run's staging holds their summaries, not their text."""
    import yaml
    from test_forget import NAME as QUIMBY
    from test_forget import TOKENIZER as TOK
    from test_forget import corpus, ids_in

    from curate.forget_command import Selection, forget

    def recipe_in(folder: Path, cache: bool) -> Path:
        stages = [{"normalize": {}}, {"exact_dedup": {}}, {"minhash_dedup": {"threshold": 0.7}},
                  {"tokenize": {"source": TOK, "pack": {"seq_len": 32}}}]  # fmt: skip
        recipe = {"name": "t", "inputs": ["data/*.jsonl"], "partition_size": 1500,
                  "output": {"root": "out", "fsync": False, "shard_size": 4000, "cache": cache},
                  "engine": {"workers": 1}, "stages": stages}  # fmt: skip
        (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
        return folder / "recipe.yaml"

    corpus(tmp_path)
    recipe = recipe_in(tmp_path, cache=True)
    before = curate.run(recipe)
    old = ids_in(before)
    before.release()  # (the purge below refuses a version a reader holds)
    after = forget(recipe, Selection(match=re.compile(QUIMBY)), "r").version
    assert len(old - ids_in(after)) == 3 and ids_in(after) <= old
    fresh = tmp_path / "fresh"
    corpus(fresh)
    exclusions = (tmp_path / "out" / "t" / ".forget" / "exclusions.json").read_text()
    Store(fresh / "out", "t").save_own(".forget", "exclusions.json", exclusions)
    assert shard_sums(curate.run(recipe_in(fresh, cache=False))) == shard_sums(after)
    assert curate.run(recipe).up_to_date

    # purge, a new file, a run killed before it publishes: the first barrier's pass staged
    # the second one's summaries of the forgotten documents, never their text
    store = tmp_path / "out" / "t"
    assert cli("gc", str(store), "--purge-forgotten").returncode == 0
    (tmp_path / "data" / "c.jsonl").write_text(json.dumps({"text": "a new note"}) + "\n")
    run_killed_before_publishing(recipe, tmp_path / "phases.log")
    assert list(store.glob(".staging-*/pass-0/ahead-*.arrow"))
    assert [p for p in store.rglob("*") if p.is_file() and b"Quimby" in p.read_bytes()] == []
