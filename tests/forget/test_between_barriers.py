"""Issue 20 pt 3 with map stages between two barriers (exact_dedup, pii and filter_length,
minhash_dedup): a later run's first barrier's pass carries a forgotten document in memory
through pii and the filter and stages only MinHash's summary of what they leave, never its
text, and the version equals what `curate forget` made of the build before (the exclusion
applied after deduplication), as does a fresh build with the same exclusions."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import yaml
from test_end_to_end import cli, run_killed_before_publishing, texts_holding
from test_forget import TOKENIZER, ids_in, shard_sums

import curate
from curate.forget_command import Selection, forget
from curate.store import Store
from curate.verify import verify

NAME = "Zelda Quimby"
EMAILS = " ".join(f"to zq{i}@example.org" for i in range(12))


def text_of(i: int) -> str:
    return f"Note {i} reads " + " ".join(f"w{(i * 13 + k) % 89}" for k in range(14 + i % 7))


def corpus(folder: Path) -> None:
    """Two inputs. Forgotten (they hold the name): d5, whose text after pii is d25's but for the name, so MinHash
    keeps d5 and drops d25 only if it summarizes d5 as pii leaves it; d7, which the filter
    (max_chars) drops before MinHash, so d27, its near copy, is kept only if MinHash never
    sees d7; and d40, a document like any other."""
    lines = [text_of(i) for i in range(60)]
    lines[5] = f"Mail {EMAILS} and w1 w2 w3 signed {NAME}"
    lines[25] = f"Mail {' '.join(['to <EMAIL_ADDRESS>'] * 12)} and w1 w2 w3 signed"
    long = " ".join(text_of(100 + k) for k in range(4))  # 324 characters, d7 365
    lines[7] = long + f" signed {NAME} in a long postscript"
    lines[27] = long
    lines[40] = f"Ask {NAME} about note 40: " + text_of(40)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    records = [json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(lines)]
    (folder / "data" / "a.jsonl").write_text("\n".join(records[:20]) + "\n")
    (folder / "data" / "b.jsonl").write_text("\n".join(records[20:]) + "\n")


BETWEEN = [{"normalize": {}}, {"exact_dedup": {}}, {"pii": {}},
           {"filter_length": {"max_chars": 350}}, {"minhash_dedup": {"threshold": 0.7}}]  # fmt: skip


def recipe_in(folder: Path, cache: bool, stages: list[dict[str, object]] | None = None) -> Path:
    """The recipe of these tests (and test_changed_rows'): `stages`, map stages between two
    barriers by default, then tokenize with packing, in small partitions and shards."""
    stages = [*(BETWEEN if stages is None else stages),
              {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 32}}}]  # fmt: skip
    recipe = {"name": "t", "inputs": ["data/*.jsonl"], "id_field": "id",
              "partition_size": 1500,
              "output": {"root": "out", "fsync": False, "shard_size": 4000, "cache": cache},
              "engine": {"workers": 1}, "stages": stages}  # fmt: skip
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    return folder / "recipe.yaml"


def texts(path: Path) -> str:
    """A stage-cache entry file's text column, as one string."""
    with pa.memory_map(str(path)) as f:
        table = pa.ipc.open_file(f).read_all()
    return "".join(table.column("text").to_pylist()) if "text" in table.schema.names else ""


def rebuilt(folder: Path, exclusions: str, extra: bytes | None = None) -> curate.Version:
    """A build from scratch of the same inputs (and the added file) with these exclusions."""
    corpus(folder)
    if extra is not None:
        (folder / "data" / "c.jsonl").write_bytes(extra)
    Store(folder / "out", "t").save_own(".forget", "exclusions.json", exclusions)
    return curate.run(recipe_in(folder, cache=False))


def test_map_stages_between_barriers(tmp_path: Path) -> None:
    corpus(tmp_path)
    recipe = recipe_in(tmp_path, cache=True)
    before = curate.run(recipe)
    old = ids_in(before)
    assert {"d5", "d27"} <= old and not {"d25", "d7"} & old
    before.release()
    after = forget(recipe, Selection(match=re.compile(NAME)), "r").version
    assert old - ids_in(after) == {"d5", "d40"}  # d5 and d40 (d7: filtered)
    store = tmp_path / "out" / "t"
    exclusions = (store / ".forget" / "exclusions.json").read_text()
    assert shard_sums(rebuilt(tmp_path / "fresh", exclusions)) == shard_sums(after)
    assert curate.run(recipe).up_to_date

    # purge, a new file, a run killed before it publishes: the first barrier's pass staged
    # MinHash's summaries of the forgotten documents, never their text
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr
    assert texts_holding(store, [NAME, "Quimby", "zq1@"]) == []
    extra = (json.dumps({"id": "c0", "text": "a new note"}) + "\n").encode()
    (tmp_path / "data" / "c.jsonl").write_bytes(extra)
    run_killed_before_publishing(recipe, tmp_path / "phases.log")
    assert list(store.glob(".staging-*/pass-0/data-*.arrow"))  # what was staged is there
    assert texts_holding(store, [NAME, "Quimby", "zq1@"]) == []
    assert list(store.glob(".staging-*/pass-0/ahead-1-*.arrow"))

    later = curate.run(recipe)
    assert texts_holding(store, [NAME, "Quimby", "zq1@"]) == []
    assert later.manifest["counts"]["removed"]["forget"] == {"forgotten": 3}
    assert shard_sums(later) == shard_sums(rebuilt(tmp_path / "fresh2", exclusions, extra))
    assert ids_in(later) - ids_in(after) == {"c0"}
    for version in (p for p in store.iterdir() if re.fullmatch(r"v\d+", p.name)):
        assert verify(version) == [], version
    assert curate.run(recipe).up_to_date


def test_entries_kept_before_the_forget(tmp_path: Path) -> None:
    """Without a purge, a later run replays the stage cache's entries kept before the forget:
    a pass whose map stages are replayed reads the forgotten documents as rows again, and
    summarizes them itself, not also from what the pass before made of them."""
    corpus(tmp_path)
    recipe = recipe_in(tmp_path, cache=True)
    curate.run(recipe).release()
    forget(recipe, Selection(match=re.compile(NAME)), "r")
    # the first pass's entries gone (evicted, say): it computes again and drops them, while
    # the second pass's entries, kept before the forget, still hold them after pii
    cache = tmp_path / "out" / "t" / ".cache"
    first = [p.parent for p in cache.rglob("rows.arrow") if "zq1@" in texts(p)]
    assert first
    for folder in set(first):
        shutil.rmtree(folder)
    extra = (json.dumps({"id": "c0", "text": "a new note"}) + "\n").encode()
    (tmp_path / "data" / "c.jsonl").write_bytes(extra)
    later = curate.run(recipe)
    exclusions = (tmp_path / "out" / "t" / ".forget" / "exclusions.json").read_text()
    assert shard_sums(later) == shard_sums(rebuilt(tmp_path / "fresh", exclusions, extra))
    assert curate.run(recipe).up_to_date


def test_a_recipe_that_starts_with_a_barrier(tmp_path: Path) -> None:
    """exact_dedup first: its pass has no map stage to replay, so it reads the inputs and drops
    the forgotten documents; the next pass replays no entry kept before the forget (it would
    bring them back, counted again: `curate forget` failed its accounting, read 80 != 83)."""
    from test_forget import NAME as QUIMBY
    from test_forget import corpus as plain_corpus

    def recipe(folder: Path, cache: bool) -> Path:
        path = recipe_in(folder, cache)
        data = yaml.safe_load(path.read_text())
        data["stages"] = [{"exact_dedup": {}},
                          {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 32}}}]  # fmt: skip
        data.pop("id_field")
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    plain_corpus(tmp_path)
    curate.run(recipe(tmp_path, cache=True)).release()
    after = forget(recipe(tmp_path, cache=True), Selection(match=re.compile(QUIMBY)), "r").version
    assert after.manifest["counts"]["removed"]["forget"] == {"forgotten": 3}
    fresh = tmp_path / "fresh"
    plain_corpus(fresh)
    exclusions = (tmp_path / "out" / "t" / ".forget" / "exclusions.json").read_text()
    Store(fresh / "out", "t").save_own(".forget", "exclusions.json", exclusions)
    assert shard_sums(curate.run(recipe(fresh, cache=False))) == shard_sums(after)
    assert curate.run(recipe(tmp_path, cache=True)).up_to_date
