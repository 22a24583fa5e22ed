"""The ids the tokenize stage writes equal the ids of each family's own reference library.

Real tokenizers shipped in PyPI packages (mistral-common's SentencePiece and tekken
files) and a byte-level BPE trained here, on a few thousand varied strings. Zero
mismatches: any difference fails. Literal special-token strings are encoded as text.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow as pa
import pytest
from trained_bpe import save_with_inference_settings, train_bpe
from varied_strings import SPECIAL_LITERALS, varied_strings

from curate.stages.base import StageContext
from curate.stages.tokenize import Tokenize, TokenizeParams

STRINGS = varied_strings(3000, seed=5)


def mistral_data() -> Path:
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or spec.origin is None:
        pytest.skip("mistral-common is not installed (test dependency, see .ci/run)")
    return Path(spec.origin).parent / "data"


def stage_ids(source: Path, texts: list[str], **params: object) -> dict[str, list[int]]:
    """What the stage writes, per document id (empty documents are removed, so absent)."""
    stage = Tokenize(TokenizeParams(source=str(source), bos=False, eos=False, **params))  # type: ignore[arg-type]
    stage.setup()
    batch = pa.record_batch({"id": [str(i) for i in range(len(texts))], "text": texts})
    out = stage.process(batch).batch
    return dict(zip(out.column("id").to_pylist(), out.column("input_ids").to_pylist(), strict=True))


def mismatches(got: dict[str, list[int]], reference: list[list[int]]) -> list[int]:
    bad = [i for i, ref in enumerate(reference) if ref and got.get(str(i)) != ref]
    bad += [i for i, ref in enumerate(reference) if not ref and str(i) in got]
    return bad


def assert_identical(source: Path, reference: list[list[int]], controls: set[int]) -> None:
    got = stage_ids(source, STRINGS)
    bad = mismatches(got, reference)
    assert not bad, [(STRINGS[i][:60], got.get(str(i)), reference[i]) for i in bad[:3]]
    assert len(got) == sum(1 for r in reference if r) > 2900
    # special-token strings in text are text: no control id ever appears in document ids
    leaked = [i for i, ids in got.items() if controls & set(ids)]
    assert not leaked, [STRINGS[int(i)] for i in leaked[:3]]


def test_sentencepiece_model_matches_sentencepiece() -> None:
    import sentencepiece as spm

    path = mistral_data() / "tokenizer.model.v1"
    sp = spm.SentencePieceProcessor(model_file=str(path))
    reference = [sp.encode(s) for s in STRINGS]
    controls = {i for i in range(sp.get_piece_size()) if sp.is_control(i) or sp.is_unknown(i)}
    assert_identical(path, reference, controls)


@pytest.mark.parametrize("name", ["tekken_240911.json", "tekken_240718.json"])
def test_tekken_matches_mistral_common(name: str) -> None:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    path = mistral_data() / name
    tekken = Tekkenizer.from_file(path)
    reference = [tekken.encode(s, bos=False, eos=False) for s in STRINGS]
    controls = set(range(tekken.num_special_tokens))
    assert_identical(path, reference, controls)
    assert max(max(r) for r in reference if r) >= 1 << 16  # ids above uint16: stored as uint32


def test_trained_tokenizer_json_matches_tokenizers(tmp_path: Path) -> None:
    import tokenizers

    tok = train_bpe(STRINGS[::3], vocab_size=800)
    path = save_with_inference_settings(tok, tmp_path / "tokenizer.json")
    ref = tokenizers.Tokenizer.from_file(str(path))
    assert ref.truncation is not None and ref.padding is not None  # inference settings present
    ref.no_truncation()
    ref.no_padding()
    ref.encode_special_tokens = True  # the library's own switch for "special strings are text"
    reference = [ref.encode(s, add_special_tokens=False).ids for s in STRINGS]
    controls = {ref.token_to_id(t) for t in ("<|endoftext|>", "<s>", "</s>", "<unk>", "<pad>")}
    assert_identical(path, reference, controls)
    assert max(len(r) for r in reference) > 1000  # long documents were not truncated to 16


def test_special_literals_are_text_in_every_family(tmp_path: Path) -> None:
    data = mistral_data()
    bpe = tmp_path / "tokenizer.json"
    train_bpe(STRINGS[:500], vocab_size=600).save(str(bpe))  # type: ignore[attr-defined]
    texts = [f"a {lit} b" for lit in SPECIAL_LITERALS] + SPECIAL_LITERALS
    for source in (data / "tokenizer.model.v1", data / "tekken_240911.json", bpe):
        stage = Tokenize(TokenizeParams(source=str(source)), StageContext())
        stage.setup()
        policy = stage.policy()
        batch = pa.record_batch({"id": [str(i) for i in range(len(texts))], "text": texts})
        rows = stage.process(batch).batch.column("input_ids").to_pylist()
        controls = set(stage.encoder().special.values())
        for text, ids in zip(texts, rows, strict=True):
            body = ids[1:-1] if policy.bos_id is not None else ids[:-1]
            assert ids[-1] == policy.eos_id
            assert not controls & set(body), (source.name, text, ids)


def test_ids_written_to_shards_match_sentencepiece(tmp_path: Path) -> None:
    """The same strings through a whole run: JSONL in, shards out, read back."""
    import sentencepiece as spm
    from conftest import write_jsonl, write_recipe

    import curate

    path = mistral_data() / "tokenizer.model.v1"
    write_jsonl(
        tmp_path / "data" / "a.jsonl", [{"id": str(i), "text": s} for i, s in enumerate(STRINGS)]
    )
    stage = {"tokenize": {"source": str(path), "bos": True, "eos": True}}
    version = curate.run(write_recipe(tmp_path, stages=[stage]))
    table = version.to_arrow()
    got = dict(
        zip(table.column("id").to_pylist(), table.column("input_ids").to_pylist(), strict=True)
    )
    sp = spm.SentencePieceProcessor(model_file=str(path))
    expected = {str(i): [1, *sp.encode(s), 2] for i, s in enumerate(STRINGS) if s}
    assert got == expected
    assert version.manifest["counts"]["removed"] == {"0:tokenize": {"empty": STRINGS.count("")}}
