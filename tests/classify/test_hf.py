"""The classifier stage with a Hugging Face sequence-classification model gives the
scores of the model's own forward pass through transformers (one document at a time,
unpadded) within 1e-4, for 750 real documents, although it batches them by length with
padding; regression models score their output; models load offline only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from bert_model import LABELS, build_model, reference_scores
from conftest import write_jsonl, write_recipe
from labelled_docs import labelled_documents

import curate
from curate.errors import CurateError
from curate.stages.base import StageContext
from curate.stages.classifier import Classifier, ClassifierParams

pytest.importorskip("torch")
pytest.importorskip("transformers")

DOCS = labelled_documents()


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bert") / "edu"
    return build_model(folder, DOCS[:400], layers=1, steps=10, max_length=64)


def run_stage(params: dict[str, object], texts: list[str]) -> pa.RecordBatch:
    stage = Classifier(ClassifierParams(**{"threads": 1, **params}), StageContext())
    ids = pa.array([f"d{i}" for i in range(len(texts))])
    batch = pa.RecordBatch.from_pydict({"id": ids, "text": pa.array(texts)})
    result = stage.process(batch)
    assert result.batch.schema == stage.output_schema(batch.schema)
    return result.batch


def test_scores_equal_the_models_own_forward_pass(bert: Path) -> None:
    texts = [t for _, t in DOCS]
    assert len(texts) >= 500
    logits = reference_scores(bert, texts)
    probs = np.exp(logits - logits.max(1, keepdims=True))  # type: ignore[union-attr]
    probs /= probs.sum(1, keepdims=True)
    models = [{"model": str(bert), "name": "edu", "batch_size": 16}]
    out = run_stage({"models": models}, texts).to_pydict()
    top = probs.argmax(1)
    assert out["edu_label"] == [LABELS[i] for i in top]
    assert np.abs(np.array(out["edu_score"]) - probs.max(1)).max() < 1e-4
    # lengths vary, so batches by length pad: the padding changed nothing
    lengths = [len(t) for t in texts]
    assert min(lengths) < 500 < max(lengths)
    assert probs.std(0).min() > 0.02  # every label's probability varies: not degenerate


def test_regression_model_scores_its_output(tmp_path: Path) -> None:
    folder = build_model(tmp_path / "reg", DOCS[:200], layers=1, hidden=48, regression=True)
    texts = [t for _, t in DOCS[:80]]
    expected = reference_scores(folder, texts)[:, 0]  # type: ignore[index]
    stage = {
        "models": [{"model": str(folder), "name": "edu"}],
        "min_score": float(np.median(expected)),
    }
    out = run_stage(stage, texts)
    assert "edu_label" not in out.schema.names  # a regression has no label
    kept = np.array(out.column("edu_score").to_pylist())
    assert len(kept) == int((expected >= np.median(expected)).sum())
    assert np.abs(np.sort(kept) - np.sort(expected[expected >= np.median(expected)])).max() < 1e-4


def test_run_records_model_files_and_loads_offline(
    bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    records = [{"id": f"d{i}", "text": t} for i, (_, t) in enumerate(DOCS[:40])]
    write_jsonl(tmp_path / "data" / "a.jsonl", records)
    stage = {"classifier": {"models": [{"model": str(bert), "keep_labels": ["web", "code"]}]}}
    version = curate.run(write_recipe(tmp_path, stages=[stage]))
    manifest = json.loads((version.path / "manifest.json").read_text())
    text = json.dumps(manifest)
    weights = bert / "model.safetensors"
    assert __import__("hashlib").sha256(weights.read_bytes()).hexdigest() in text
    assert '"device": "cpu"' in text and '"max_length": 64' in text
    assert set(version.to_arrow().column("edu_label").to_pylist()) <= {"web", "code"}
    # a hub id is looked up in the local cache only: not there, it is refused by name
    stage = {"classifier": {"models": [{"model": "someorg/not-cached"}]}}
    with pytest.raises(CurateError, match="not in the local Hugging Face cache"):
        curate.run(write_recipe(tmp_path, stages=[stage]))
    # device enters the fingerprint: cuda is another version (refused here: no GPU)
    on_gpu = Classifier(ClassifierParams(models=[{"model": str(bert), "device": "cuda"}]))
    on_cpu = Classifier(ClassifierParams(models=[{"model": str(bert)}]))
    assert on_gpu.params.model_dump() != on_cpu.params.model_dump()


def test_a_regression_models_scores_are_bucketed(tmp_path: Path) -> None:
    """classifier_buckets with FineWeb-Edu's kind of model (one output, 0-5): buckets by
    the weighted percentiles of its output, and statistics binned on its 0-5 scale."""
    from test_buckets import reference

    folder = build_model(tmp_path / "reg", DOCS[:200], layers=1, hidden=48, regression=True)
    records = [{"id": f"d{i}", "text": t} for i, (_, t) in enumerate(DOCS[:80])]
    write_jsonl(tmp_path / "data" / "a.jsonl", records)
    stage = {"models": [{"model": str(folder), "name": "edu"}], "threads": 1}
    recipe = write_recipe(tmp_path, stages=[{"classifier_buckets": {**stage, "buckets": 4}}])
    version = curate.run(recipe)
    table = version.to_arrow()
    assert "edu_label" not in table.column_names
    scores = table.column("edu_score").to_pylist()
    edges, want = reference(scores, [len(r["text"]) for r in records], [25.0, 50.0, 75.0])
    assert table.column("classifier_bucket").to_pylist() == want
    assert version.manifest["stages"][0]["details"]["edges"] == edges
    plain = run_stage({"models": stage["models"]}, [r["text"] for r in records])
    assert plain.column("edu_score").to_pylist() == scores  # the classifier's own scores
    stats = json.loads((version.path / "statistics.json").read_text())
    found = json.dumps(stats)
    assert '"classifier_buckets/edu_score"' in found and '"hi": 5.0' in found


def test_forward_passes_shared_with_other_workers_give_the_same_bytes(
    bert: Path, tmp_path: Path
) -> None:
    """Where the engine shares a stage's items (the local engine's help desk), each forward
    pass (one group of documents batched by length) is an item another worker may compute,
    in any order, its input and output crossing a pipe (pickled): the scores are bit for
    bit those of one worker, with the same groups."""
    import pickle

    from curate.stages import shared_work

    texts = [t for _, t in DOCS[:300]]
    models = [{"model": str(bert), "name": "edu", "batch_size": 16}]
    alone = run_stage({"models": models, "min_score": 0.4}, texts)
    computed: list[int] = []

    def backwards(stage: object, items: list, work: object, size: object) -> list:  # type: ignore[type-arg]
        out = [None] * len(items)
        for i in sorted(range(len(items)), key=lambda i: -size(items[i])):  # type: ignore[operator]
            out[i] = pickle.loads(pickle.dumps(work(pickle.loads(pickle.dumps(items[i])))))  # type: ignore[operator]
            computed.append(i)
        return out

    shared_work.install(backwards)
    try:
        shared = run_stage({"models": models, "min_score": 0.4}, texts)
    finally:
        shared_work.install(None)
    assert len(computed) > 10 and computed != sorted(computed)
    assert shared.equals(alone)
    assert 0 < alone.num_rows < len(texts)  # the bound removed some
