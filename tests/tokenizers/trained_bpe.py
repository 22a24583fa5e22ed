"""A byte-level BPE tokenizer.json trained here with `tokenizers`, deterministically."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<s>", "</s>", "<unk>", "<pad>"]


def train_bpe(texts: Iterable[str], vocab_size: int = 1000) -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer)
    return tok


def save_with_inference_settings(tok: object, path: Path) -> Path:
    """Saved with truncation, padding and a BOS template, as inference files often are."""
    from tokenizers import processors

    tok.enable_truncation(max_length=16)  # type: ignore[attr-defined]
    tok.enable_padding(length=32, pad_id=4, pad_token="<pad>")  # type: ignore[attr-defined]
    tok.post_processor = processors.TemplateProcessing(  # type: ignore[attr-defined]
        single="<s> $A", special_tokens=[("<s>", 1)]
    )
    tok.save(str(path))  # type: ignore[attr-defined]
    return path


def sample_texts(root: Path) -> list[str]:
    """Every text in sample_data/, in a fixed order (bad lines skipped)."""
    import gzip
    import json

    texts = []
    files = [*sorted((root / "web").glob("*.jsonl")), root / "archive.jsonl.gz"]
    for path in files:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    text = json.loads(line)["text"]
                except (ValueError, KeyError, TypeError):
                    continue
                if isinstance(text, str):
                    texts.append(text)
    texts += [p.read_text(encoding="utf-8") for p in sorted((root / "notes").iterdir())]
    return texts


if __name__ == "__main__":  # regenerate sample_data/tokenizer/ (committed)
    import json
    import sys

    repo = Path(__file__).resolve().parents[2]
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else repo / "sample_data" / "tokenizer"
    out.mkdir(parents=True, exist_ok=True)
    tok = train_bpe(sample_texts(repo / "sample_data"), vocab_size=2000)
    tok.save(str(out / "tokenizer.json"))  # type: ignore[attr-defined]
    config = {"bos_token": "<s>", "eos_token": "<|endoftext|>", "add_bos_token": False,
              "add_eos_token": False, "unk_token": "<unk>", "pad_token": "<pad>"}  # fmt: skip
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
