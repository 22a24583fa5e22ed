"""Tokenizer sources from local disk: files, model folders, ranks files, the offline HF cache."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import REPO
from varied_strings import varied_strings

from curate.errors import CurateError
from curate.stages.base import StageContext
from curate.stages.tokenize import Tokenize, TokenizeParams
from curate.tokenizers import resolve_source, tokenizer_fingerprint

SAMPLE = REPO / "sample_data" / "tokenizer"


def tokenize(
    source: str, texts: list[str], base_dir: str = ".", **params: object
) -> list[list[int]]:
    stage = Tokenize(TokenizeParams(source=source, **params), StageContext(base_dir=base_dir))  # type: ignore[arg-type]
    stage.setup()
    batch = pa.record_batch({"id": [str(i) for i in range(len(texts))], "text": texts})
    return stage.process(batch).batch.column("input_ids").to_pylist()


def test_folder_file_and_relative_paths_agree(tmp_path: Path) -> None:
    folder = resolve_source(str(SAMPLE))
    assert folder.kind == "tokenizer.json" and folder.config is not None
    texts = ["Hello there, <|endoftext|> is text.", "second"]
    by_folder = tokenize("tokenizer", texts, base_dir=str(SAMPLE.parent))
    by_file = tokenize(str(SAMPLE / "tokenizer.json"), texts)
    assert by_folder == by_file
    eos = 0  # <|endoftext|>, the sample's eos_token
    assert all(ids[-1] == eos and eos not in ids[:-1] for ids in by_folder)
    assert tokenizer_fingerprint(SAMPLE) == tokenizer_fingerprint(SAMPLE / "tokenizer.json")


def test_config_sets_bos_and_recipe_overrides(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(SAMPLE, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.update(add_bos_token=True, add_eos_token=False)  # Llama/Mistral style
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    [ids] = tokenize(str(folder), ["abc"])
    assert ids[0] == 1 and ids[-1] == 0  # BOS from the config, EOS anyway (the separator)
    [ids] = tokenize(str(folder), ["abc"], bos=False, eos=False)
    assert 1 not in ids and 0 not in ids
    stage = Tokenize(TokenizeParams(source=str(folder)))
    policy = stage.describe()["tokenizer"]["policy"]
    assert policy["bos"]["why"] == "auto: tokenizer_config.json add_bos_token"
    assert policy["eos"] == {"added": True, "token": "<|endoftext|>", "id": 0,
                             "why": "recipe: EOS after every document (the separator)"}  # fmt: skip


def test_hub_id_from_the_local_cache_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "hub"
    snap = cache / "models--acme--tiny" / "snapshots" / ("a" * 40)
    shutil.copytree(SAMPLE, snap)
    (cache / "models--acme--tiny" / "refs").mkdir()
    (cache / "models--acme--tiny" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_source("acme/tiny").main == (snap / "tokenizer.json").resolve()
    assert tokenize("acme/tiny", ["hi"]) == tokenize(str(SAMPLE), ["hi"])
    with pytest.raises(CurateError, match="not in the local Hugging Face cache"):
        resolve_source("acme/absent")


def _ranks_file(path: Path, size: int = 2000) -> Path:
    """A tiktoken ranks file: the first ranks of a real byte-level BPE (mistral-common's tekken)."""
    mc = pytest.importorskip("mistral_common")
    tekken = Path(mc.__file__).parent / "data" / "tekken_240911.json"
    vocab = json.loads(tekken.read_text())["vocab"][:size]
    path.write_text("".join(f"{t['token_bytes']} {t['rank']}\n" for t in vocab))
    return path


def test_tiktoken_ranks_file_matches_tiktoken(tmp_path: Path) -> None:
    import tiktoken

    pattern = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
    path = _ranks_file(tmp_path / "mini.tiktoken")
    ranks = {base64.b64decode(line.split()[0]): int(line.split()[1])
             for line in path.read_text().splitlines()}  # fmt: skip
    special = {"<|endoftext|>": 2000}
    ref = tiktoken.Encoding("ref", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)
    texts = [t for t in varied_strings(1000, seed=9) if t]
    got = tokenize(str(path), texts, pattern=pattern, special_tokens=special, bos=False, eos=False)
    assert got == [ref.encode(t, disallowed_special=()) for t in texts]
    [ids] = tokenize(str(path), ["x <|endoftext|>"], pattern=pattern, special_tokens=special)
    assert ids[-1] == 2000 and 2000 not in ids[:-1]


def test_tiktoken_preset_from_file_name(tmp_path: Path) -> None:
    path = _ranks_file(tmp_path / "cl100k_base.tiktoken")
    stage = Tokenize(TokenizeParams(source=str(path)))
    info = stage.describe()["tokenizer"]
    assert info["kind"] == "tiktoken" and info["special_tokens"]["<|endoftext|>"] == 100257
    assert info["id_type"] == "uint32" and info["policy"]["bos"]["added"] is False


def test_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CurateError, match="not found"):
        resolve_source(str(tmp_path / "nope.json"))
    (tmp_path / "x.json").write_text('{"hello": 1}')
    with pytest.raises(CurateError, match="neither a tokenizer"):
        resolve_source(str(tmp_path / "x.json"))
    ranks = _ranks_file(tmp_path / "custom.tiktoken", 300)
    with pytest.raises(CurateError, match="split pattern"):
        Tokenize(TokenizeParams(source=str(ranks))).setup()
    with pytest.raises(CurateError, match="not a special token"):
        Tokenize(TokenizeParams(source=str(SAMPLE), eos_token="<nope>")).setup()
    (tmp_path / "empty").mkdir()
    with pytest.raises(CurateError, match="holds no tokenizer"):
        resolve_source(str(tmp_path / "empty"))


def test_fingerprint_follows_content_not_path(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(SAMPLE, copy)
    assert tokenizer_fingerprint(copy) == tokenizer_fingerprint(SAMPLE)
    data = json.loads((copy / "tokenizer.json").read_text())
    data["added_tokens"][0]["content"] = "<|eot|>"
    (copy / "tokenizer.json").write_text(json.dumps(data))
    assert tokenizer_fingerprint(copy) != tokenizer_fingerprint(SAMPLE)


def test_folder_prefers_tokenizer_json_unless_kind_says(tmp_path: Path) -> None:
    mc = pytest.importorskip("mistral_common")
    folder = tmp_path / "llama-style"
    shutil.copytree(SAMPLE, folder)
    shutil.copy(
        Path(mc.__file__).parent / "data" / "tokenizer.model.v1", folder / "tokenizer.model"
    )
    assert resolve_source(str(folder)).kind == "tokenizer.json"
    spm = resolve_source(str(folder), kind="sentencepiece")
    assert spm.kind == "sentencepiece" and spm.main.name == "tokenizer.model"
    with pytest.raises(CurateError, match="holds no tekken file"):
        resolve_source(str(folder), kind="tekken")


def test_a_ranks_file_named_tokenizer_model_is_tiktoken(tmp_path: Path) -> None:
    """Llama 3 ships its tiktoken ranks as original/tokenizer.model: text, not SentencePiece's
    protobuf; the name alone must not decide."""
    folder = tmp_path / "original"
    folder.mkdir()
    _ranks_file(folder / "tokenizer.model", 300)
    assert resolve_source(str(folder / "tokenizer.model")).kind == "tiktoken"
    assert resolve_source(str(folder)).kind == "tiktoken"
    spm = Path(pytest.importorskip("mistral_common").__file__).parent / "data"
    assert resolve_source(str(spm / "tokenizer.model.v1")).kind == "sentencepiece"
