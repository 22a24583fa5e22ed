"""Issue 20 pt 3 when a barrier before the last changes the rows it keeps (line_dedup removes
lines; minhash_dedup with `cluster_size` adds a column): what the next barrier summarizes of
a forgotten document depends on that barrier's decision, so no earlier pass can summarize it
ahead. A later run stages nothing of it: the pass after that barrier reads it from its input
again and runs it through the passes before (`curate.excluded_rows`). Killed just before it
publishes, the run leaves its text nowhere under the root, and its version equals a fresh
build with the same exclusions."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from test_between_barriers import recipe_in
from test_end_to_end import cli, run_killed_before_publishing, texts_holding
from test_forget import ids_in, shard_sums

import curate
from curate.forget_command import Selection, forget
from curate.store import Store
from curate.verify import verify

NAME = "Zelda Quimby"
EMAILS = " ".join(f"to zq{i}@example.org" for i in range(12))
REDACTED = " ".join(["to <EMAIL_ADDRESS>"] * 12)
BOILER = "Subscribe to the weekly digest of notes " + " ".join(f"b{k}" for k in range(30))


def text_of(i: int) -> str:
    return f"Note {i} reads " + " ".join(f"w{(i * 13 + k) % 89}" for k in range(14 + i % 7))


def write(folder: Path, lines: list[str]) -> None:
    (folder / "data").mkdir(parents=True, exist_ok=True)
    records = [json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(lines)]
    (folder / "data" / "a.jsonl").write_text("\n".join(records[:20]) + "\n")
    (folder / "data" / "b.jsonl").write_text("\n".join(records[20:]) + "\n")


def lines_for_line_dedup(folder: Path) -> None:
    """Forgotten: d5, which is d25's text after pii but for the name only once line_dedup has
    taken its first line away (d1 holds it first), so MinHash keeps d5 and drops d25 only if
    it summarizes d5 as line_dedup and pii leave it; and d40, a document like any other."""
    lines = [text_of(i) for i in range(60)]
    lines[1] = BOILER + "\n" + text_of(1)
    lines[5] = BOILER + "\n" + f"Mail {EMAILS} and w1 w2 w3 signed {NAME}"
    lines[25] = f"Mail {REDACTED} and w1 w2 w3 signed"
    lines[40] = f"Ask {NAME} about note 40: " + text_of(40)
    write(folder, lines)


def lines_for_cluster_size(folder: Path) -> None:
    """Forgotten (they hold a zq address): d5, which is d25 after pii, so exact_dedup drops
    d25 only if it sees d5 as pii leaves it; and d40. MinHash, before pii, tells them apart."""
    lines = [text_of(i) for i in range(60)]
    lines[5] = f"Mail {EMAILS} and w1 w2 w3 signed"
    lines[25] = f"Mail {REDACTED} and w1 w2 w3 signed"
    lines[40] = "Ask about note 40 at zq40@example.org: " + text_of(40)
    write(folder, lines)


LINE_DEDUP = [{"normalize": {}}, {"exact_dedup": {}}, {"line_dedup": {}}, {"pii": {}},
              {"minhash_dedup": {"threshold": 0.7}}]  # fmt: skip
CLUSTER_SIZE = [{"normalize": {}}, {"minhash_dedup": {"threshold": 0.7, "cluster_size": True}},
                {"pii": {}}, {"exact_dedup": {}}]  # fmt: skip

CASES = {
    "line_dedup": (LINE_DEDUP, lines_for_line_dedup, NAME, [NAME, "Quimby", "zq1@"]),
    "cluster_size": (CLUSTER_SIZE, lines_for_cluster_size, r"zq\d+@", ["zq1@", "zq40@"]),
}


def rebuilt(
    folder: Path,
    stages: list[dict[str, object]],
    corpus: Callable[[Path], None],
    exclusions: str,
    extra: bytes | None = None,
) -> curate.Version:
    """A build from scratch of the same inputs (and the added file) with these exclusions."""
    corpus(folder)
    if extra is not None:
        (folder / "data" / "c.jsonl").write_bytes(extra)
    Store(folder / "out", "t").save_own(".forget", "exclusions.json", exclusions)
    return curate.run(recipe_in(folder, cache=False, stages=stages))


def purged_then_killed(folder: Path, recipe: Path, needles: list[str]) -> bytes:
    """`gc --purge-forgotten`, a new file, then a run killed just before it publishes:
    nothing of the forgotten documents is left under the root, though the run staged its
    passes. Returns the new file's bytes."""
    store = folder / "out" / "t"
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr
    assert texts_holding(store, needles) == []
    extra = (json.dumps({"id": "c0", "text": "a new note"}) + "\n").encode()
    (folder / "data" / "c.jsonl").write_bytes(extra)
    run_killed_before_publishing(recipe, folder / "phases.log")
    assert list(store.glob(".staging-*/pass-*/data-*.arrow"))  # what was staged is there
    assert texts_holding(store, needles) == []
    return extra


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_barrier_that_changes_rows_before_another(tmp_path: Path, case: str) -> None:
    stages, corpus, pattern, needles = CASES[case]
    corpus(tmp_path)
    recipe = recipe_in(tmp_path, cache=True, stages=stages)
    before = curate.run(recipe)
    old = ids_in(before)
    assert {"d5", "d40"} <= old and "d25" not in old
    before.release()
    after = forget(recipe, Selection(match=re.compile(pattern)), "r").version
    assert old - ids_in(after) == {"d5", "d40"}
    store = tmp_path / "out" / "t"
    exclusions = (store / ".forget" / "exclusions.json").read_text()
    assert shard_sums(rebuilt(tmp_path / "fresh", stages, corpus, exclusions)) == shard_sums(after)

    extra = purged_then_killed(tmp_path, recipe, needles)
    if case == "line_dedup":  # exact_dedup's pass summarized them for line_dedup
        assert list(store.glob(".staging-*/pass-0/ahead-1-*.arrow"))

    later = curate.run(recipe)
    assert texts_holding(store, needles) == []
    assert later.manifest["counts"]["removed"]["forget"] == {"forgotten": 2}
    fresh = rebuilt(tmp_path / "fresh2", stages, corpus, exclusions, extra)
    assert shard_sums(later) == shard_sums(fresh)
    assert ids_in(later) - ids_in(after) == {"c0"}
    for version in (p for p in store.iterdir() if re.fullmatch(r"v\d+", p.name)):
        assert verify(version) == [], version
    assert curate.run(recipe).up_to_date
