"""A real client: `curate run recipes/instruct-alpaca.yaml` on sample_data/instruct, read
back with `datasets`, fine-tunes a tiny `transformers` causal LM (torch, CPU) with the
labels exactly as written, and its loss falls."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from conftest import REPO

import curate
from curate.cli import main


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> curate.Version:
    root = tmp_path_factory.mktemp("instruct")
    shutil.copytree(REPO / "sample_data" / "instruct", root / "sample_data" / "instruct")
    shutil.copytree(
        REPO / "sample_data" / "chat" / "tokenizer", root / "sample_data" / "chat" / "tokenizer"
    )
    (root / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "instruct-alpaca.yaml", root / "recipes")
    result = CliRunner().invoke(main, ["run", str(root / "recipes" / "instruct-alpaca.yaml")])
    assert result.exit_code == 0, result.output
    return curate.open(root / "curated" / "instruct-alpaca")


def test_instruct_recipe_runs_on_the_samples(version: curate.Version) -> None:
    from tokenizers import Tokenizer

    manifest = version.manifest
    assert manifest["recipe"]["chat"]["shape"] == "alpaca"
    reasons = version.quarantined().column("reason").to_pylist()
    assert reasons == ["chat: empty content in message 1 (assistant)"]
    records = {}
    for path in sorted((REPO / "sample_data" / "instruct").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            records[record["id"]] = record
    rows = version.to_arrow().to_pylist()
    assert len(rows) == len(records) - 1 == 40
    tok = Tokenizer.from_file(str(REPO / "sample_data" / "chat" / "tokenizer" / "tokenizer.json"))
    for row in rows:
        answer = [lab for lab in row["labels"] if lab != -100]
        record = records[row["id"]]
        assert tok.decode(answer, skip_special_tokens=False) == record["output"] + "<|im_end|>"
        prompt = record["instruction"] + (f"\n\n{record['input']}" if record.get("input") else "")
        text = tok.decode(row["input_ids"], skip_special_tokens=False)
        assert text == (
            f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
            f"{record['output']}<|im_end|>\n"
        )


def test_a_tiny_causal_lm_learns_from_the_labels_as_written(version: curate.Version) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    ds = version.to_dataset()
    assert set(ds.column_names) >= {"input_ids", "labels", "num_tokens"}
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(REPO / "sample_data" / "chat" / "tokenizer" / "tokenizer.json"))
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
        tie_word_embeddings=True,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) < 50_000
    pad = tok.token_to_id("<pad>")  # padding carries label -100, as non-assistant positions do
    rows = ds.to_list()
    batches = []
    for start in range(0, len(rows), 8):
        chunk = rows[start : start + 8]
        width = max(len(r["input_ids"]) for r in chunk)
        ids = torch.full((len(chunk), width), pad)
        labels = torch.full((len(chunk), width), -100)
        attention = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, r in enumerate(chunk):
            n = len(r["input_ids"])
            ids[i, :n] = torch.tensor(r["input_ids"])
            labels[i, :n] = torch.tensor(r["labels"])  # as curate wrote them
            attention[i, :n] = 1
        batches.append((ids, labels, attention))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-2)
    losses = []
    model.train()
    for _ in range(12):
        for ids, labels, attention in batches:
            loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    print(f"\nloss: first 5 steps {first:.2f}, last 5 steps {last:.2f} ({len(losses)} steps)")
    assert last < 0.6 * first
