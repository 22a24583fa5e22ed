"""classifier_buckets: a classifier's score cut into weighted percentile buckets over the
whole corpus (Nemotron-CC style). The edges equal a separately written brute-force
reading of the documented rule (ties, zero weights, NaN, -0.0) however the summaries are
cut into pieces; a build keeps and labels by them with the `classifier` stage's own
scores, byte-identical on 1 and 2 workers and from the stage cache, which re-decides new
edges from the cached scores without running the model."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import yaml
from conftest import write_jsonl, write_recipe
from fasttext_cli import train
from labelled_docs import labelled_documents

import curate
from curate.classify import percentiles as pct
from curate.collective.local import LocalSummaries
from curate.errors import CurateError
from curate.io.batches import ORDER, order_column
from curate.reasons import known

DOCS = labelled_documents()


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ft")
    return train(DOCS[::2], folder / "model")


# -- the rule, written again by brute force ------------------------------------------------


def reference(
    scores: list[float], weights: list[int], cuts: list[float]
) -> tuple[list[float] | None, list[int]]:
    """Edges and buckets as the docs state them: for a cut at p%, the lowest score whose
    documents at or below it weigh at least p * W / 100; a bucket is the number of edges
    strictly below the score. NaN is the lowest score; -0.0 equals 0.0."""
    scores = [-math.inf if math.isnan(s) else s for s in scores]
    total = sum(weights)
    if total == 0:
        return None, [0] * len(scores)
    edges = []
    for cut in cuts:
        target = cut * total / 100
        acc = 0
        for value in sorted(set(scores)):
            acc += sum(w for s, w in zip(scores, weights, strict=True) if s == value)
            if acc >= target:
                edges.append(value)
                break
    return edges, [sum(1 for e in edges if e < s) for s in scores]


def decided(
    scores: np.ndarray, weights: np.ndarray, cuts: list[float], pieces: int, rng: Any
) -> tuple[list[float] | None, list[int]]:
    """The stage's pieces: edges folded over `pieces` arbitrary pieces, then buckets."""
    n = len(scores)
    table = pa.table({
        ORDER: pa.array(order_column(0, 0, n), pa.uint64()),
        pct.KEY: pa.array(pct.score_keys(scores), pa.uint32()),
        pct.WEIGHT: pa.array(weights, pa.int64()),
    })  # fmt: skip
    table = table.take(pa.array(rng.permutation(n)))
    cuts_at = sorted(rng.choice(np.arange(1, n), size=min(pieces - 1, n - 1), replace=False))
    bounds = [0, *cuts_at, n] if n else [0, 0]
    tables = [table.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    rows = LocalSummaries.from_tables(tables).rows([pct.KEY, pct.WEIGHT])
    edges, total, documents = pct.find_edges(rows, cuts)
    assert documents == n and total == int(weights.sum())
    buckets = pct.buckets_of(pct.score_keys(scores), edges).tolist()
    return (None if edges is None else pct.key_scores(edges).tolist()), buckets


def test_edges_and_buckets_follow_the_rule_on_ties_weights_and_pieces() -> None:
    rng = np.random.default_rng(7)
    for case in range(300):
        n = int(rng.integers(1, 60))
        pool = np.array([-1.5, -0.0, 0.0, 1e-8, 0.25, 0.5, 0.5000001, 1.0, 3e9, np.nan], np.float32)
        scores = rng.choice(pool, size=n) if case % 3 else rng.random(n).astype(np.float32)
        weights = rng.choice([0, 0, 1, 2, 7, 1000], size=n).astype(np.int64)
        if case % 17 == 0:
            weights[:] = 0  # nothing weighs anything
        k = int(rng.integers(1, 6))
        cuts = sorted({float(c) for c in rng.choice([1, 5, 10, 25, 33.3, 50, 75, 90, 99.9], k)})
        want_edges, want = reference([float(s) for s in scores], weights.tolist(), cuts)
        got_edges, got = decided(scores, weights, cuts, int(rng.integers(1, 5)), rng)
        assert got == want, (case, scores, weights, cuts)
        assert got_edges == want_edges, case


def test_keys_keep_the_order_of_scores() -> None:
    values = np.array([-np.inf, -3e38, -1.0, -1e-45, -0.0, 0.0, 1e-45, 0.5, 1.0, 3e38, np.inf],
                      np.float32)  # fmt: skip
    keys = pct.score_keys(values)
    assert np.all(np.diff(keys.astype(np.int64)) >= 0)
    assert keys[4] == keys[5]  # -0.0 is 0.0
    assert np.array_equal(pct.key_scores(keys)[5:], values[5:])
    assert pct.score_keys(np.array([np.nan], np.float32))[0] == keys[0]  # NaN: the lowest


# -- builds ------------------------------------------------------------------------------


def data(folder: Path, n: int = 240) -> list[dict[str, str]]:
    records = [{"id": f"d{i}", "text": t} for i, (_, t) in enumerate(DOCS[:n])]
    records.append({"id": "empty", "text": ""})  # weighs nothing, still bucketed
    half = len(records) // 2
    write_jsonl(folder / "data" / "a.jsonl", records[:half])
    write_jsonl(folder / "data" / "b.jsonl", records[half:])
    return records


def build(folder: Path, model: Path, root: str = "out", workers: int = 1,
          **params: Any) -> curate.Version:  # fmt: skip
    stage = {"models": [{"model": str(model), "label": "web", "name": "q"}], **params}
    recipe = write_recipe(
        folder,
        stages=[{"classifier_buckets": stage}, {"exact_dedup": {}}],
        partition_size="64KB",
        output={"root": root, "fsync": False},
        engine={"workers": workers},
    )
    return curate.run(recipe)


def shas(version: curate.Version, key: str) -> list[str]:
    return [f["sha256"] for f in version.manifest[key]]


def classifier_scores(folder: Path, model: Path) -> dict[str, float]:
    """What the `classifier` map stage gives the same documents."""
    recipe = write_recipe(
        folder,
        stages=[{"classifier": {"models": [{"model": str(model), "label": "web", "name": "q"}]}}],
        output={"root": "plain", "fsync": False},
    )
    table = curate.run(recipe).to_arrow()
    return dict(zip(table.column("id").to_pylist(), table.column("q_score").to_pylist(),
                    strict=True))  # fmt: skip


def test_build_keeps_and_labels_by_bucket_and_reports_them(model: Path, tmp_path: Path) -> None:
    records = data(tmp_path)
    version = build(tmp_path, model, buckets=4, min_bucket=2)
    scores = classifier_scores(tmp_path, model)
    assert len(scores) == len(records)
    texts = {r["id"]: r["text"] for r in records}
    ids = sorted(scores)
    edges, buckets = reference([scores[i] for i in ids], [len(texts[i]) for i in ids],
                               [25.0, 50.0, 75.0])  # fmt: skip
    want = dict(zip(ids, buckets, strict=True))
    table = version.to_arrow()
    got = dict(zip(table.column("id").to_pylist(), table.column("classifier_bucket").to_pylist(),
                   strict=True))  # fmt: skip
    assert got == {i: want[i] for i in got} and min(got.values()) == 2  # buckets 2, 3 kept
    duplicates = version.manifest["stages"][1]["removed"].get("duplicate", 0)
    assert len(got) + duplicates == sum(1 for b in want.values() if b >= 2)  # exact_dedup's
    assert table.schema.field("classifier_bucket").type == pa.int32()
    assert dict(
        zip(table.column("id").to_pylist(), table.column("q_score").to_pylist(), strict=True)
    ) == {i: scores[i] for i in got}  # the classifier's scores
    record = version.manifest["stages"][0]
    assert record["kind"] == "barrier" and record["changed"] == 0
    dropped = {f"classifier_bucket:{b}": sum(1 for v in want.values() if v == b) for b in (0, 1)}
    assert record["removed"] == dropped and all(known(r) for r in dropped)
    details = record["details"]
    assert details["edges"] == edges and details["weight"] == "characters"
    assert details["percentiles"] == [25.0, 50.0, 75.0]
    total = sum(len(t) for t in texts.values())
    assert details["total_weight"] == total
    for b, row in enumerate(details["buckets"]):
        assert row["documents"] == sum(1 for v in want.values() if v == b)
        assert row["weight"] == sum(len(texts[i]) for i, v in want.items() if v == b)
        assert row.get("dropped", False) == (b < 2)
    below = sum(r["weight"] for r in details["buckets"][:2])
    assert below >= total / 2 > below - details["buckets"][1]["weight"]  # the edge's meaning
    stats = json.loads((version.path / "statistics.json").read_text())
    text = json.dumps(stats)
    assert "classifier_buckets/q_score" in text and "edge_3" in text
    assert "classifier_buckets/bucket_3/characters" in text


def test_labels_only_and_other_weights(model: Path, tmp_path: Path) -> None:
    records = data(tmp_path, 120)
    for weight in ("documents", "field"):
        extra = {"weight_field": "n"} if weight == "field" else {}
        if weight == "field":  # token counts kept from the input: a column of the recipe
            for r in records:
                r["n"] = len(r["text"].split())  # type: ignore[assignment]
            write_jsonl(tmp_path / "data" / "a.jsonl", records[:60])
            write_jsonl(tmp_path / "data" / "b.jsonl", records[60:])
        recipe = write_recipe(
            tmp_path,
            stages=[{"classifier_buckets": {
                "models": [{"model": str(model), "label": "web", "name": "q"}],
                "percentiles": [50], "weight": weight, "bucket_column": "half", **extra}}],
            fields={"n": "int64"} if weight == "field" else {},
            output={"root": f"out-{weight}", "fsync": False},
        )  # fmt: skip
        version = curate.run(recipe)
        table = version.to_arrow()
        assert table.num_rows == len(records)  # labels only: nothing dropped
        halves = table.column("half").to_pylist()
        w = [1] * len(halves) if weight == "documents" else table.column("n").to_pylist()
        low = sum(x for x, h in zip(w, halves, strict=True) if h == 0)
        assert set(halves) == {0, 1} and low >= sum(w) / 2
        got = version.manifest["stages"][0]["details"]
        assert got["weight"] == ("n" if weight == "field" else "documents")


def test_same_bytes_on_one_and_two_workers_and_from_the_cache(model: Path, tmp_path: Path) -> None:
    data(tmp_path)
    one = build(tmp_path, model, "one", workers=1, buckets=5, min_bucket=1)
    two = build(tmp_path, model, "two", workers=2, buckets=5, min_bucket=1)
    assert shas(one, "shards") == shas(two, "shards")
    assert shas(one, "rejected") == shas(two, "rejected")
    # the cache keeps the scores: other buckets re-decide without running the model
    cached = tmp_path / "cached"
    cached.mkdir()
    (cached / "data").symlink_to(tmp_path / "data", target_is_directory=True)
    first = build(cached, model, "out", buckets=10, min_bucket=3)
    assert first.manifest["stages"][0]["cache"]["docs_computed"] > 0
    again = build(cached, model, "out", buckets=5, min_bucket=1, combine="max")
    record = again.manifest["stages"][0]["cache"]
    assert record["docs_computed"] == 0 and record["docs_reused"] > 0
    assert shas(again, "shards") == shas(one, "shards")
    assert shas(again, "rejected") == shas(one, "rejected")


def test_recipe_mistakes_name_their_line(model: Path, tmp_path: Path) -> None:
    data(tmp_path, 20)
    bad = [  # (parameters, the line named, what it says)
        ({"percentiles": [50, 20]}, "percentiles:", "percentile cuts must increase: 50 then 20"),
        ({"percentiles": [0, 50]}, "percentiles:", "must lie between 0 and 100, not 0"),
        ({"buckets": 4, "min_bucket": 4}, "classifier_buckets:",
         "min_bucket 4 would drop every document: there are 4 buckets, 0 to 3"),
        ({"buckets": 4, "percentiles": [50]}, "classifier_buckets:", "not both"),
        ({"weight": "field"}, "classifier_buckets:", "`weight_field` names the column"),
        ({"bucket_column": None}, "classifier_buckets:", "the buckets are unused"),
        ({"models": [{"model": str(model), "keep_labels": ["web"]}]}, "classifier_buckets:",
         "keep_labels filters by label"),
    ]  # fmt: skip
    for params, key, message in bad:
        recipe = write_recipe(tmp_path, stages=[{"normalize": {}}, {"classifier_buckets": {
            "models": [{"model": str(model)}], **params}}])  # fmt: skip
        line = next(i for i, text in enumerate(recipe.read_text().splitlines(), 1)
                    if key in text)  # fmt: skip
        with pytest.raises(CurateError, match=message) as info:
            curate.run(recipe)
        assert f"recipe.yaml:{line}: stages[1].classifier_buckets" in str(info.value)
        assert not (tmp_path / "out").exists()


def test_inspect_filter_shows_edges_and_examples_either_side(model: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from curate.cli import main
    from curate.inspect_filter import inspect_filter

    data(tmp_path, 120)
    recipe = write_recipe(tmp_path, stages=[{"classifier_buckets": {
        "models": [{"model": str(model), "label": "web", "name": "q"}],
        "percentiles": [50, 90], "min_bucket": 1}}])  # fmt: skip
    report = inspect_filter(recipe, "classifier_buckets", sample=100, examples=2)
    scores = report.scores
    assert scores is not None and scores.column == "q_score"
    assert int(scores.counts.sum()) == report.documents == 100
    assert len(scores.marks) == 2 and scores.marks[0] <= scores.marks[1]
    for j, edge in enumerate(scores.marks):
        below = next(
            v for k, v in scores.examples.items() if k.startswith(f"at or just below edge {j + 1}")
        )
        above = next(
            v for k, v in scores.examples.items() if k.startswith(f"just above edge {j + 1}")
        )
        assert len(below) == len(above) == 2
        assert all(s <= edge for _, s, _ in below) and all(s > edge for _, s, _ in above)
        assert below[0][1] >= below[1][1] and above[0][1] <= above[1][1]  # nearest first
        assert below[0][1] == edge  # an edge is a score a document has: the lower bucket's
    # the drops on the sample are bucket 0's: scores at or below the first edge
    assert report.first == {"classifier_bucket:0": int((scores.scores <= scores.marks[0]).sum())}
    shown = CliRunner().invoke(main, ["inspect-filter", str(recipe), "--stage",
                                      "classifier_buckets", "--sample", "100"])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "q_score over 100 documents" in shown.output and "p50 = " in shown.output
    assert "at or just below edge 2 (p90" in shown.output
    assert "on the sample alone: the corpus's edges differ" in shown.output
    shares = [float(line.split(",")[-1].split("%")[0]) for line in shown.output.splitlines()
              if line.startswith("  bucket ")]  # fmt: skip
    assert len(shares) == 3 and shares[0] >= 50 and shares[0] + shares[1] >= 90
    assert sum(shares) == pytest.approx(100, abs=0.2)


def test_pipeline_labels_documents(model: Path) -> None:
    rows = [{"id": f"d{i}", "text": t} for i, (_, t) in enumerate(DOCS[:40])]
    stage = {"models": [{"model": str(model), "label": "web", "name": "q"}], "buckets": 2}
    table = curate.Pipeline().add("classifier_buckets", **stage).process(rows).table
    assert table.num_rows == 40 and set(table.column("classifier_bucket").to_pylist()) == {0, 1}
    assert yaml.safe_dump(stage)  # the stage's parameters are plain recipe values


def test_a_new_file_moves_old_documents_across_an_edge_as_a_rebuild_does(
    model: Path, tmp_path: Path
) -> None:
    """Corpus-wide: a new input re-decides every bucket from the cached scores of the old
    partitions (only the new documents are scored) and equals a build from scratch."""
    records = data(tmp_path, 160)
    first = build(tmp_path, model, buckets=4, min_bucket=1)
    before = buckets_by_id(first)
    extra = [{"id": f"new{i}", "text": t} for i, (label, t) in enumerate(DOCS[160:])
             if label == "web"]  # fmt: skip
    write_jsonl(tmp_path / "data" / "c.jsonl", extra)  # high scores: the edges rise
    second = build(tmp_path, model, buckets=4, min_bucket=1)
    record = second.manifest["stages"][0]["cache"]
    assert record["docs_computed"] == len(extra) and record["docs_reused"] == len(records)
    after = buckets_by_id(second)
    assert any(after.get(i) != b for i, b in before.items())  # old documents moved
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "data").symlink_to(tmp_path / "data", target_is_directory=True)
    rebuilt = build(scratch, model, "out", buckets=4, min_bucket=1)
    assert shas(second, "shards") == shas(rebuilt, "shards")
    assert shas(second, "rejected") == shas(rebuilt, "rejected")


def buckets_by_id(version: curate.Version) -> dict[str, int]:
    table = version.to_arrow()
    return dict(zip(table.column("id").to_pylist(), table.column("classifier_bucket").to_pylist(),
                    strict=True))  # fmt: skip


def test_each_models_buckets_and_the_highest_wins(model: Path, tmp_path: Path) -> None:
    """`bucket_by: each`, Nemotron-CC's ensemble: every model's score is bucketed over the
    corpus on its own, and a document's bucket is the highest of its models' buckets."""
    records = data(tmp_path, 160)
    texts = {r["id"]: r["text"] for r in records}
    models = [{"model": str(model), "label": lab, "name": lab} for lab in ("web", "legal")]
    recipe = write_recipe(tmp_path, stages=[{"classifier_buckets": {
        "models": models, "buckets": 5, "bucket_by": "each", "min_bucket": 2}}],
        output={"root": "each", "fsync": False})  # fmt: skip
    bucketed = recipe.read_text()
    version = curate.run(recipe)
    table = version.to_arrow()
    ids = table.column("id").to_pylist()
    scores = {lab: dict(zip(ids, table.column(f"{lab}_score").to_pylist(), strict=True))
              for lab in ("web", "legal")}  # fmt: skip
    # the kept documents' scores, and the dropped ones' from the classifier stage
    for lab in ("web", "legal"):
        plain = write_recipe(tmp_path, stages=[{"classifier": {"models": [
            {"model": str(model), "label": lab, "name": lab}]}}],
            output={"root": f"plain-{lab}", "fsync": False})  # fmt: skip
        t = curate.run(plain).to_arrow()
        every = dict(zip(t.column("id").to_pylist(), t.column(f"{lab}_score").to_pylist(),
                         strict=True))  # fmt: skip
        assert all(every[i] == v for i, v in scores[lab].items())
        scores[lab] = every
    order = sorted(texts)
    weights = [len(texts[i]) for i in order]
    cuts = [20.0, 40.0, 60.0, 80.0]
    edges = {}
    per_model = []
    for lab in ("web", "legal"):
        edges[f"{lab}_score"], b = reference([scores[lab][i] for i in order], weights, cuts)
        per_model.append(b)
    want = {i: max(a, b) for i, a, b in zip(order, *per_model, strict=True)}
    got = dict(zip(ids, table.column("classifier_bucket").to_pylist(), strict=True))
    assert got == {i: b for i, b in want.items() if b >= 2}
    assert any(a != b for a, b in zip(*per_model, strict=True))  # the two models disagree
    details = version.manifest["stages"][0]["details"]
    assert details["edges"] == edges
    combined = np.mean([[scores[lab][i] for lab in ("web", "legal")] for i in ids], axis=1)
    assert np.allclose(table.column("classifier_score").to_pylist(), combined, atol=1e-7)
    from curate.inspect_filter import inspect_filter

    recipe.write_text(bucketed)  # the classifier recipes above took its place
    report = inspect_filter(recipe, "classifier_buckets", sample=80, examples=1)
    shown = str(report)
    assert [r.column for r in report.scores.reports] == ["web_score", "legal_score"]
    assert all(len(r.marks) == 4 for r in report.scores.reports)
    assert "web_score over 80 documents" in shown and "legal_score over 80 documents" in shown


def test_conversations_are_scored_and_weighed_by_their_chosen_messages(model: Path) -> None:
    """On chat records a conversation is scored as `classifier` scores it (the chosen
    roles' contents joined) and weighs the characters of those contents only."""
    from curate.chat.reader import messages_array
    from curate.chat.spec import MESSAGES
    from curate.inspect_barrier import on_sample
    from curate.stages.base import StageContext
    from curate.stages.classifier import Classifier, ClassifierParams
    from curate.stages.classifier_buckets import BucketParams, ClassifierBuckets

    texts = [t for _, t in DOCS[:90]]
    spec = {"models": [{"model": str(model), "label": "web", "name": "q"}], "roles": ["assistant"]}
    context = StageContext(chat=True)

    def conversations(pads: list[int]) -> tuple[list[Any], pa.RecordBatch]:
        convs = [[("user", f"question {i}: " + "x" * pad), ("assistant", t)]
                 for i, (t, pad) in enumerate(zip(texts, pads, strict=True))]  # fmt: skip
        return convs, pa.RecordBatch.from_arrays(
            [pa.array([f"c{i}" for i in range(len(convs))]), messages_array(convs),
             pa.array(np.arange(len(convs), dtype=np.uint64))],
            names=["id", MESSAGES, ORDER],
        )  # fmt: skip

    # The users of the lower-scored half get long padding, so that weighing whole
    # conversations would move the edge whatever scores the trained model gives.
    unpadded = Classifier(ClassifierParams(**spec), context).process(conversations([0] * 90)[1])
    ranks = sorted(range(90), key=lambda i: unpadded.batch.column("q_score")[i].as_py())
    convs, batch = conversations([4000 if i in set(ranks[:45]) else 0 for i in range(90)])
    plain = Classifier(ClassifierParams(**spec), context).process(batch).batch
    stage = ClassifierBuckets(BucketParams(**spec, percentiles=[50]), context)
    stage.setup()
    out = on_sample(stage, batch).batch
    assert out.column("q_score").equals(plain.column("q_score"))
    scores = plain.column("q_score").to_pylist()
    _, want = reference(scores, [len(t) for t in texts], [50.0])  # the assistant's text only
    assert out.column("classifier_bucket").to_pylist() == want
    _, by_all = reference(scores, [len(t) + len(c[0][1]) + 2 for t, c in zip(texts, convs,
                          strict=True)], [50.0])  # fmt: skip
    assert by_all != want  # the users' padding would have moved the edge
