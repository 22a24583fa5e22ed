"""A BertForSequenceClassification of BERT-base width (hidden 768, 12 heads, intermediate
3072) built here: a WordPiece tokenizer trained on the labelled documents, random
weights, and a few fine-tuning steps so its scores vary. The identity test uses 2 layers
(BERT-base has 12; each layer is the same computation, and 12 would make the reference's
one-document-at-a-time pass take minutes on two cores); the benchmark uses 12."""

from __future__ import annotations

from pathlib import Path

LABELS = ("code", "legal", "web")


def train_tokenizer(texts: list[str], max_length: int, vocab_size: int = 4000) -> object:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = WordPieceTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False)
    tok.train_from_iterator(texts, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )  # fmt: skip
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=max_length,
    )  # fmt: skip


def build_model(
    folder: Path,
    docs: list[tuple[str, str]],
    *,
    layers: int = 2,
    max_length: int = 128,
    steps: int = 4,
    regression: bool = False,
    hidden: int = 768,
) -> Path:
    """The model folder (config, safetensors weights, tokenizer), fine-tuned `steps` times
    on batches of 8 documents (labels as classes, or a regression on the class index)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.set_num_threads(1)
    tokenizer = train_tokenizer([t for _, t in docs], max_length)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,  # type: ignore[arg-type]
        num_attention_heads=12 if hidden % 12 == 0 else 4, intermediate_size=4 * hidden,
        max_position_embeddings=512, num_labels=1 if regression else len(LABELS),
        id2label={0: "score"} if regression else dict(enumerate(LABELS)),
        problem_type="regression" if regression else "single_label_classification",
    )  # fmt: skip
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model.train()
    for step in range(steps):
        batch = docs[step * 8 : step * 8 + 8]
        inputs = tokenizer([t for _, t in batch], truncation=True, padding=True,  # type: ignore[operator]
                           return_tensors="pt")  # fmt: skip
        target = torch.tensor([LABELS.index(lab) for lab, _ in batch])
        labels = target.float() if regression else target
        loss = model(**inputs, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)  # type: ignore[attr-defined]
    return folder


def reference_scores(folder: Path, texts: list[str]) -> object:
    """The model's own forward pass through transformers, one document at a time, as
    FineWeb-Edu's annotation code runs it: (n, outputs) logits as float32 numpy."""
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(1)  # two threads on two busy cores spin more than they compute
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    rows = []
    with torch.inference_mode():
        for text in texts:
            inputs = tokenizer(text, return_tensors="pt", truncation=True)
            rows.append(model(**inputs).logits.float().numpy()[0])
    return np.stack(rows)
