"""The pii stage: parameters, actions, keys, drop_document, NER through a saved spaCy pipeline,
errors that never quote text, and a small stage object."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from curate.errors import CurateError
from curate.recipe import Recipe
from curate.stages.base import StageContext
from curate.stages.pii import Pii, PiiParams

pytest.importorskip("presidio_analyzer")

KEY = "0123456789abcdef0123456789abcdef"
TEXT = "Mail ann@example.com, then bob@example.org; call +44 20 7946 0958."


def stage(tmp: Path | None = None, **params) -> Pii:
    s = Pii(PiiParams(**params), StageContext(base_dir=str(tmp or ".")))
    s.setup()
    return s


def run(s: Pii, *texts: str):
    batch = pa.RecordBatch.from_pylist([{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
    return s.process(batch)


def test_defaults_redact_with_type_tags_and_count() -> None:
    result = run(stage(), TEXT, "no personal data", "")
    assert result.batch.column("text").to_pylist() == [
        "Mail <EMAIL_ADDRESS>, then <EMAIL_ADDRESS>; call <PHONE_NUMBER>.",
        "no personal data",
        "",
    ]
    assert result.changed == 1
    assert result.counters == {
        "documents/analyzed": 1,
        "documents/skipped": 1,
        "documents/changed": 1,
        "values/EMAIL_ADDRESS/redact": 2,
        "values/PHONE_NUMBER/redact": 1,
    }


def test_mask_and_allow_list() -> None:
    s = stage(entities={"EMAIL_ADDRESS": "mask", "PHONE_NUMBER": "redact"}, mask_char="#",
              allow_list=["bob@example.org"])  # fmt: skip
    out = run(s, TEXT).batch.column("text")[0].as_py()
    assert out == "Mail " + "#" * 15 + ", then bob@example.org; call <PHONE_NUMBER>."


def test_hash_is_keyed_and_stable(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CURATE_PII_KEY", KEY)
    a = run(stage(entities={"EMAIL_ADDRESS": "hash"}), "x ann@example.com y ann@example.com")
    tokens = a.batch.column("text")[0].as_py().split()[1::2]
    assert tokens[0] == tokens[1] and tokens[0].startswith("<EMAIL_ADDRESS:")
    (tmp_path / "key").write_text("another-key-0123456789abcdef\n")
    b = stage(tmp_path, entities={"EMAIL_ADDRESS": "hash"}, hash_key_file="key")
    assert run(b, "x ann@example.com").batch.column("text")[0].as_py().split()[1] != tokens[0]
    assert (
        b.software()["pii_key_id"]
        != Pii(PiiParams(entities={"EMAIL_ADDRESS": "hash"})).software()["pii_key_id"]
    )
    assert KEY not in repr(b.software()) and "another-key" not in repr(b.software())


def test_missing_or_short_key_names_where_it_looked_never_the_key(monkeypatch) -> None:
    monkeypatch.delenv("CURATE_PII_KEY", raising=False)
    with pytest.raises(CurateError, match="CURATE_PII_KEY"):
        stage(entities={"EMAIL_ADDRESS": "hash"})
    monkeypatch.setenv("CURATE_PII_KEY", "short-secret")
    with pytest.raises(CurateError) as err:
        stage(entities={"EMAIL_ADDRESS": "hash"})
    assert "short-secret" not in str(err.value)


def test_drop_document_above_a_count() -> None:
    s = stage(
        entities={"EMAIL_ADDRESS": {"action": "drop_document", "above": 1, "otherwise": "mask"}}
    )
    result = run(s, TEXT, "only carl@example.net here")
    assert result.batch.column("id").to_pylist() == ["d1"]
    assert result.batch.column("text")[0].as_py() == "only " + "*" * 16 + " here"
    assert result.removed is not None
    assert result.removed.column("reason").to_pylist() == ["pii:EMAIL_ADDRESS"]
    assert "example" not in repr(result.removed.to_pylist())
    assert result.counters["values/EMAIL_ADDRESS/drop_document"] == 2
    assert result.counters["documents/dropped"] == 1


def test_recipe_validation_errors() -> None:
    base = {"name": "t", "inputs": ["x.jsonl"]}
    with pytest.raises(CurateError, match="pii"):
        Recipe.from_dict(base | {"stages": [{"pii": {"entities": {"EMAIL_ADDRESS": "shred"}}}]})
    with pytest.raises(CurateError, match="pii"):
        Recipe.from_dict(base | {"stages": [{"pii": {"score_threshold": 2}}]})


def test_ner_entity_needs_a_local_spacy_pipeline(tmp_path: Path) -> None:
    with pytest.raises(CurateError, match="spacy_model"):
        stage(entities={"PERSON": "redact"})
    with pytest.raises(CurateError, match="never downloads"):
        stage(tmp_path, entities={"PERSON": "redact"}, spacy_model="no_such_pipeline")


def test_ner_through_a_saved_spacy_pipeline(tmp_path: Path) -> None:
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "PERSON", "pattern": "Ada Lovelace"},
                        {"label": "GPE", "pattern": "London"}])  # fmt: skip
    nlp.to_disk(tmp_path / "pipeline")
    s = stage(tmp_path, entities={"PERSON": "redact", "LOCATION": "redact", "EMAIL_ADDRESS": "redact"},
              spacy_model="pipeline")  # fmt: skip
    out = run(s, "Ada Lovelace wrote from London to ada@example.com.").batch.column("text")[0]
    assert out.as_py() == "<PERSON> wrote from <LOCATION> to <EMAIL_ADDRESS>."
    assert s.software()["spacy"]


def test_errors_never_quote_the_document(monkeypatch) -> None:
    s = stage()

    def boom(text: str):
        raise ValueError(f"cannot parse {text}")

    monkeypatch.setattr(s._analysis, "analyze", boom)
    with pytest.raises(CurateError) as err:
        run(s, TEXT)
    assert "ann@example.com" not in str(err.value) and "d0" in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_stage_object_stays_small_and_picklable() -> None:
    s = stage()
    blob = pickle.dumps(s)
    assert len(blob) < 4000 and b"presidio" not in blob
    clone = pickle.loads(blob)
    assert run(clone, TEXT).changed == 1  # sets itself up where it lands


def test_several_languages_each_with_its_recognizers() -> None:
    s = stage(languages=["en", "es"], entities={"EMAIL_ADDRESS": "redact", "ES_NIF": "redact"})
    out = run(s, "escribe a ana@example.es, NIF 12345678Z").batch.column("text")[0].as_py()
    assert out == "escribe a <EMAIL_ADDRESS>, NIF <ES_NIF>"
    with pytest.raises(CurateError, match="NO_SUCH_ENTITY"):
        stage(entities={"NO_SUCH_ENTITY": "redact"})
