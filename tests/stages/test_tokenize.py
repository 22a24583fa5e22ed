"""The tokenize stage: columns and types, the BOS/EOS policy, pickling, the manifest record."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import REPO, corpus, write_jsonl, write_recipe

import curate
from curate.errors import CurateError
from curate.stages.base import StageContext
from curate.stages.tokenize import Tokenize, TokenizeParams, id_type

TOKENIZER = REPO / "sample_data" / "tokenizer"


def batch(texts: list[str | None], **extra: list[object]) -> pa.RecordBatch:
    return pa.record_batch({"id": [f"d{i}" for i in range(len(texts))], "text": texts, **extra})


def make(**params: object) -> Tokenize:
    stage = Tokenize(TokenizeParams(source=str(TOKENIZER), **params), StageContext())  # type: ignore[arg-type]
    stage.setup()
    return stage


def test_columns_types_and_schema_agree() -> None:
    stage = make()
    b = batch(["hello world", "", None, "x"], source=["a", "b", "c", "d"])
    result = stage.process(b)
    out = result.batch
    assert out.schema == stage.output_schema(b.schema)
    assert out.schema.names == ["id", "source", "input_ids", "num_tokens"]
    assert out.schema.field("input_ids").type == pa.list_(pa.uint16())
    assert out.column("id").to_pylist() == ["d0", "d3"]  # empty documents hold no tokens
    assert result.removed is not None and result.removed.column("reason").to_pylist() == [
        "empty",
        "empty",
    ]
    assert out.column("num_tokens").to_pylist() == [
        len(r) for r in out.column("input_ids").to_pylist()
    ]
    kept = make(keep_text=True).process(b).batch
    assert kept.column("text").to_pylist() == ["hello world", "x"]


def test_id_type_is_the_narrowest() -> None:
    assert id_type(65536) == pa.uint16() and id_type(65537) == pa.uint32()


def test_policy_applies_and_is_recorded() -> None:
    texts = ["one document", "another one"]
    bare = make(bos=False, eos=False).process(batch(texts)).batch.column("input_ids").to_pylist()
    both = make(bos=True).process(batch(texts)).batch.column("input_ids").to_pylist()
    assert both == [[1, *ids, 0] for ids in bare]  # <s> ... <|endoftext|>
    eos = make(eos_token="</s>").process(batch(texts)).batch.column("input_ids").to_pylist()
    assert eos == [[*ids, 2] for ids in bare]
    info = make().describe()["tokenizer"]
    assert info["policy"]["bos"]["added"] is False and info["policy"]["eos"]["id"] == 0
    assert info["vocab_size"] == 2000 and info["id_type"] == "uint16"
    assert set(info["files"]) == {"tokenizer.json", "tokenizer_config.json"}


def test_stage_pickles_small_without_the_tokenizer() -> None:
    stage = make()
    blob = pickle.dumps(stage)
    assert len(blob) < 2000
    clone = pickle.loads(blob)
    assert "_encoder" not in clone.__dict__
    clone.setup()
    texts = batch(["same ids after shipping"])
    assert clone.process(texts).batch.equals(stage.process(texts).batch)


def test_reading_text_after_it_was_dropped_fails_before_data_moves(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(5))
    recipe = write_recipe(
        tmp_path, stages=[{"tokenize": {"source": str(TOKENIZER)}}, {"normalize": {}}]
    )
    with pytest.raises(
        CurateError, match="reads column 'text', but stages\\[0\\] tokenize removed it"
    ):
        curate.run(recipe)


def test_run_records_tokenizer_identity_and_follows_its_files(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(40, dup_every=0))
    shutil.copytree(TOKENIZER, tmp_path / "tok")
    recipe = write_recipe(tmp_path, stages=[{"normalize": {}}, {"tokenize": {"source": "tok"}}])
    v1 = curate.run(recipe)
    m = v1.manifest
    details = m["stages"][1]["details"]["tokenizer"]
    assert details["source"] == "tok" and details["kind"] == "tokenizer.json"
    assert m["stages"][1]["software"]["tokenizers"]
    assert (
        m["stages"][1]["software"]["tokenizer_sha256:tokenizer.json"]
        == details["files"]["tokenizer.json"]
    )
    assert m["tokens"] == sum(s["tokens"] for s in m["shards"]) > 0
    from curate.summary import render_summary

    assert f"tokens {m['tokens']:,}" in render_summary(v1)  # the CLI's table shows the total
    assert [f["name"] for f in m["schema"]] == ["id", "input_ids", "num_tokens"]
    assert curate.run(recipe).up_to_date
    config = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    (tmp_path / "tok" / "tokenizer_config.json").write_text(
        json.dumps({**config, "add_bos_token": True})
    )
    v2 = curate.run(recipe)
    assert v2.name == "v2" and v2.to_arrow().column("input_ids")[0].as_py()[0] == 1


def test_up_to_date_check_loads_no_tokenizer_library(tmp_path: Path) -> None:
    import subprocess
    import sys

    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(10, dup_every=0))
    recipe = write_recipe(tmp_path, stages=[{"tokenize": {"source": str(TOKENIZER)}}])
    curate.run(recipe)
    code = (
        "import sys, curate\n"
        f"v = curate.run({str(recipe)!r})\n"
        "heavy = {'tokenizers', 'sentencepiece', 'tiktoken'} & {m.split('.')[0] for m in sys.modules}\n"
        "print(v.up_to_date, sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True []"


def test_a_batch_in_pieces_gives_the_ids_of_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the engine shares a stage's items (the local engine's help desk), a batch goes
    through the encoder in pieces, which other workers may encode in any order; the rows,
    removals and ids are those of one call over the batch."""
    from curate.stages import shared_work
    from curate.stages import tokenize as module

    texts = [f"Document {i}: " + "word " * (i % 17) if i % 9 else "" for i in range(120)]
    texts[5] = None  # type: ignore[call-overload]
    whole = make().process(batch(texts))
    done: list[int] = []

    def backwards(stage: object, items: list, work: object, size: object) -> list:  # type: ignore[type-arg]
        out = [None] * len(items)
        for i in reversed(range(len(items))):  # another worker's order
            out[i] = work(items[i])  # type: ignore[operator]
            done.append(i)
        return out

    monkeypatch.setattr(module, "PIECE_CHARS", 64)
    shared_work.install(backwards)
    try:
        pieces = make().process(batch(texts))
    finally:
        shared_work.install(None)
    assert len(done) > 10
    assert pieces.batch.equals(whole.batch)
    assert pieces.removed is not None and whole.removed is not None
    assert pieces.removed.equals(whole.removed)


def test_pieces_keep_the_texts_in_order_and_reach_their_size() -> None:
    from curate.stages.shared_work import runs

    texts = ["a" * n for n in (3, 0, 5, 9, 1, 1, 1, 20, 2)]
    pieces = [texts[a:b] for a, b in runs(map(len, texts), 6)]
    assert [t for p in pieces for t in p] == texts
    assert all(sum(map(len, p)) >= 6 for p in pieces[:-1])
    assert [len(p) for p in pieces] == [3, 1, 4, 1]  # 3+0+5, 9, 1+1+1+20, 2
    assert runs([], 6) == []
