"""The classifier stage with a fastText model gives the labels and probabilities of
Debian's `fasttext` command on the same preprocessed text, for 750 real documents; its
preprocessing is DCLM's; it keeps by score and by label, and the model file's sha256
enters the fingerprint and the manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import write_jsonl, write_recipe
from fasttext_cli import dclm_one_line, predict_prob, train
from labelled_docs import BREAKS, labelled_documents

import curate
from curate.classify.fasttext_model import one_line
from curate.errors import CurateError
from curate.reasons import known
from curate.stages.base import StageContext
from curate.stages.classifier import Classifier, ClassifierParams

DOCS = labelled_documents()
LABELS = ("code", "legal", "web")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ft")
    return train(DOCS[::2], folder / "model")


def run_stage(params: dict[str, object], texts: list[str]) -> pa.RecordBatch:
    stage = Classifier(ClassifierParams(**params), StageContext())
    ids = pa.array([f"d{i}" for i in range(len(texts))])
    batch = pa.RecordBatch.from_pydict({"id": ids, "text": pa.array(texts)})
    stage.setup()
    result = stage.process(batch)
    assert result.batch.schema == stage.output_schema(batch.schema)
    return result.batch


def test_model_is_better_than_chance(model: Path, tmp_path: Path) -> None:
    held_out = DOCS[1::2]
    found = predict_prob(model, [t for _, t in held_out], tmp_path)
    right = sum(preds[0][0] == label for (label, _), preds in zip(held_out, found, strict=True))
    assert right / len(held_out) > 0.8  # three classes: chance is 1/3


def test_labels_and_probabilities_match_the_fasttext_command(model: Path, tmp_path: Path) -> None:
    texts = [t for _, t in DOCS]
    assert len(texts) >= 500
    reference = predict_prob(model, texts, tmp_path)
    # one model for the top label, and the same file once per label for every probability
    models = [{"model": str(model), "name": "top"}]
    models += [{"model": str(model), "name": lab, "label": lab} for lab in LABELS]
    out = run_stage({"models": models}, texts).to_pydict()
    for i, ref in enumerate(reference):
        assert out["top_label"][i] == ref[0][0], i
        # fastText prints a float as C++'s ostream does (%g: 6 significant digits)
        assert f"{out['top_score'][i]:g}" == ref[0][1], i
        assert {lab: f"{out[f'{lab}_score'][i]:g}" for lab, _ in ref} == dict(ref), i
        assert sorted(lab for lab, _ in ref) == list(LABELS)
    scores = np.array(out["web_score"])
    assert 0.05 < (scores > 0.5).mean() < 0.95  # varied, not degenerate


def test_preprocessing_is_dclms() -> None:
    hostile = [
        "", "  ", "\n", "a\nb", "a\r\nb", "a\n\nb", " lead\n", "x\x1fy", "\ttab\t",
        *[f"one{b}two{b}{b}three{b}" for b in BREAKS], "a\u2028\u2029b", "\r\n\r\n",
    ]  # fmt: skip
    texts = hostile + [t for _, t in DOCS]
    assert [one_line(t) for t in texts] == [dclm_one_line(t) for t in texts]


def recipe(tmp_path: Path, model: Path, **params: object) -> Path:
    records = [{"id": f"d{i}", "text": t} for i, (_, t) in enumerate(DOCS[:120])]
    write_jsonl(tmp_path / "data" / "a.jsonl", records)
    stage = {"classifier": {"models": [{"model": str(model), "name": "q", **params}]}}
    if "min_score" in params:
        stage["classifier"]["min_score"] = params.pop("min_score")
        stage["classifier"]["models"][0].pop("min_score")
    return write_recipe(tmp_path, stages=[stage])


def test_run_keeps_by_score_and_records_the_model(model: Path, tmp_path: Path) -> None:
    model = Path(shutil.copy(model, tmp_path / "model.bin"))  # retrained below
    version = curate.run(recipe(tmp_path, model, label="web", min_score=0.5))
    manifest = json.loads((version.path / "manifest.json").read_text())
    record = next(s for s in manifest["stages"] if s["name"] == "classifier")
    table = version.to_arrow()
    assert table.num_rows > 10
    assert min(table.column("q_score").to_pylist()) >= 0.5
    assert "q_label" not in table.column_names  # a label named: its score only
    removed = record["counts"]["removed"] if "counts" in record else record["removed"]
    assert set(removed) == {"classifier_below:q_score"} and known("classifier_below:q_score")
    digest = __import__("hashlib").sha256(model.read_bytes()).hexdigest()
    assert json.dumps(record).count(digest) >= 1
    # another model file (retrained) is another version; the same file is not
    assert curate.run(recipe(tmp_path, model, label="web", min_score=0.5)).path == version.path
    train(DOCS[::2], model.with_suffix(""), epoch=3)
    assert curate.run(recipe(tmp_path, model, label="web", min_score=0.5)).path != version.path


def test_keep_labels_and_label_column(model: Path) -> None:
    texts = [t for _, t in DOCS[:60]]
    models = [{"model": str(model), "name": "m", "keep_labels": ["__label__code", "web"]}]
    stage = Classifier(ClassifierParams(models=models), StageContext())
    ids = pa.array([f"d{i}" for i in range(len(texts))])
    result = stage.process(pa.RecordBatch.from_pydict({"id": ids, "text": pa.array(texts)}))
    kept = result.batch.to_pydict()
    assert set(kept["m_label"]) == {"code", "web"}
    assert result.removed is not None and set(result.removed.column("reason").to_pylist()) == {
        "classifier_label:legal"
    }
    assert result.counters and sum(result.counters.values()) == len(texts)


def test_several_models_combine(model: Path) -> None:
    texts = [t for _, t in DOCS[:30]]
    models = [{"model": str(model), "name": lab, "label": lab} for lab in ("web", "code")]
    for combine, how in (("max", np.maximum), ("mean", lambda a, b: (a + b) / 2)):
        out = run_stage({"models": models, "combine": combine, "column": "both"}, texts)
        a, b = (
            np.array(out.column(c).to_pylist(), np.float64) for c in ("web_score", "code_score")
        )
        assert np.allclose(out.column("both").to_pylist(), how(a, b), atol=1e-7)


def test_errors_name_the_problem(model: Path, tmp_path: Path) -> None:
    with pytest.raises(CurateError, match="has no label 'hq'"):
        run_stage({"models": [{"model": str(model), "label": "hq"}]}, ["x"])
    with pytest.raises(CurateError, match="not found"):
        Classifier(ClassifierParams(models=[{"model": "nope/none.bin"}])).software()
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a model")
    with pytest.raises(CurateError, match="not a fastText model"):
        run_stage({"models": [{"model": str(junk)}]}, ["x"])
    with pytest.raises(ValueError, match="column prefix"):
        ClassifierParams(models=[{"model": "a/m.bin"}, {"model": "b/m.bin"}])


def test_inspect_filter_shows_scores_either_side_of_the_threshold(
    model: Path, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from curate.cli import main
    from curate.inspect_filter import inspect_filter

    path = recipe(tmp_path, model, label="web", min_score=0.5)
    report = inspect_filter(path, "classifier", sample=100, examples=2)
    scores = report.scores
    assert scores is not None and scores.column == "q_score"
    assert int(scores.counts.sum()) == report.documents == 100
    below, above = (
        scores.examples["just below min_score 0.5"],
        scores.examples["at or just above min_score 0.5"],
    )
    assert len(below) == len(above) == 2
    assert all(s < 0.5 for _, s, _ in below) and all(s >= 0.5 for _, s, _ in above)
    assert below[0][1] >= below[1][1] and above[0][1] <= above[1][1]  # nearest first
    assert report.first == {"classifier_below:q_score": int((scores.scores < 0.5).sum())}
    shown = CliRunner().invoke(main, ["inspect-filter", str(path), "--stage", "classifier",
                                      "--sample", "100"])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "q_score over 100 documents" in shown.output and "<- 0.5" in shown.output
