"""Hugging Face sequence-classification models (FineWeb-Edu's classifier and its kin).

A model folder holds its config, its weights and its own tokenizer; both load with
`local_files_only` (and `HF_HUB_OFFLINE` set for the worker), so nothing is fetched. As
FineWeb-Edu's annotation code does, each document is tokenized with truncation at the
model's maximum length and scored by the model's forward pass; the maximum length is the
tokenizer's `model_max_length` where the config's `max_position_embeddings` allows it
(else the latter), the dtype the config's. Documents are batched by length: sorted by
their token count within a record batch and padded only to the longest of each group of
`batch_size` documents and `batch_tokens` padded tokens, so short documents share a
forward pass and a long one runs alone; the scores go back in order.

A model with one output (`num_labels: 1`, FineWeb-Edu's) is a regression: its score is
that output. Otherwise each label's probability is the softmax of the logits (a sigmoid
each for `problem_type: multi_label_classification`), and the top label is the argmax.

Runs on CPU unless the recipe says `device: cuda` (a parameter, so in the fingerprint:
GPU and CPU scores differ in the last bits and can flip a threshold decision), with
torch's threads set to the worker's CPU share.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from curate.classify.predictions import Predictions
from curate.errors import CurateError, shown

ForwardAll = Callable[[list[dict[str, list[Any]]]], list[np.ndarray]]
"""Runs forward passes: each group's outputs (`HfModel.forward`), in the groups' order."""

_EXTRA = (
    "Hugging Face classifier models need transformers and torch: pip install 'curate[classifier]'"
)


def software() -> dict[str, str]:
    out = {}
    for name in ("transformers", "torch", "tokenizers"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            raise CurateError(_EXTRA) from None
    return out


def read_config(folder: Path) -> dict[str, Any]:
    try:
        config: dict[str, Any] = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        where = shown(folder)
        raise CurateError(f"classifier model {where}: unreadable config.json: {exc}") from None
    return config


def config_labels(config: dict[str, Any]) -> tuple[tuple[str, ...], bool]:
    """The labels in id order, and whether the model is a regression (one output): read
    from config.json alone, so the driver knows the columns without loading the model."""
    id2label = config.get("id2label") or {}
    n = int(config.get("num_labels") or len(id2label) or 2)
    labels = tuple(str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(n))
    regression = n == 1 or config.get("problem_type") == "regression"
    return labels, regression


class HfModel:
    """A loaded sequence-classification model and its tokenizer; built once per worker."""

    def __init__(
        self,
        folder: Path,
        device: str,
        batch_size: int,
        max_length: int | None,
        threads: int,
        batch_tokens: int = 2048,
    ) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"  # this worker never asks the hub for anything
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError:
            raise CurateError(_EXTRA) from None
        self._torch: Any = torch
        if device == "cuda" and not torch.cuda.is_available():
            where = shown(folder)
            raise CurateError(f"classifier model {where}: device cuda, but torch sees no GPU")
        torch.set_num_threads(max(1, threads))
        config = read_config(folder)
        self.labels, self.regression = config_labels(config)
        self.multi_label = config.get("problem_type") == "multi_label_classification"
        try:
            self._tokenizer: Any = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            self._model: Any = AutoModelForSequenceClassification.from_pretrained(
                folder, local_files_only=True, dtype="auto"
            )
        except (OSError, ValueError) as exc:
            raise CurateError(f"classifier model {shown(folder)} cannot be loaded: {exc}") from None
        self._model.eval().to(device)
        self.device = device
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.max_length = max_length or model_max_length(folder, config)

    def groups(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        """Consecutive documents of `order` (shortest first) per forward pass: at most
        `batch_size`, and at most `batch_tokens` tokens once padded to the longest, so
        short documents share a pass and a long one runs alone (on a CPU a large padded
        batch of long documents is slower than one at a time)."""
        out: list[list[int]] = []
        group: list[int] = []
        for i in order:
            if group and (len(group) == self.batch_size
                          or (len(group) + 1) * lengths[i] > self.batch_tokens):  # fmt: skip
                out.append(group)
                group = []
            group.append(i)
        return [*out, group] if group else out

    def predict(self, texts: list[str], forward_all: ForwardAll | None = None) -> Predictions:
        """Each text's probabilities (or score). The groups are made from `texts` alone;
        `forward_all` runs their forward passes (default: here, one after the other; the
        classifier stage hands them to the local engine's idle workers at a pass's end),
        and each group's outputs depend on that group alone."""
        n = len(texts)
        width = 1 if self.regression else len(self.labels)
        probs = np.zeros((n, width), dtype=np.float32)
        if n:
            encoded = self._tokenizer(texts, truncation=True, max_length=self.max_length)
            ids = encoded["input_ids"]
            order = sorted(range(n), key=lambda i: (len(ids[i]), i))
            groups = self.groups(order, [len(x) for x in ids])
            inputs = [{k: [encoded[k][i] for i in rows] for k in encoded} for rows in groups]
            run = forward_all or (lambda batches: [self.forward(b) for b in batches])
            for rows, out in zip(groups, run(inputs), strict=True):
                probs[rows] = out
        top = np.full(n, -1, dtype=np.int64) if self.regression else probs.argmax(axis=1)
        return Predictions(self.labels, probs, top, regression=self.regression)

    def forward(self, group: dict[str, list[Any]]) -> np.ndarray:
        """One group's forward pass (token ids per document, unpadded): each document's
        probabilities (or score), float32."""
        width = 1 if self.regression else len(self.labels)
        torch = self._torch
        with torch.inference_mode():
            padded = self._tokenizer.pad(group, return_tensors="pt")
            padded = {k: v.to(self.device) for k, v in padded.items()}
            logits = self._model(**padded).logits.float()
            if not self.regression:
                logits = logits.sigmoid() if self.multi_label else logits.softmax(-1)
            out: np.ndarray = logits.cpu().numpy()[:, :width]
        return out


def declared_dtype(config: dict[str, Any]) -> str:
    """The dtype the config says the weights are in (float32 when it says none)."""
    return str(config.get("dtype") or config.get("torch_dtype") or "float32")


def model_max_length(folder: Path, config: dict[str, Any]) -> int:
    """The tokenizer's `model_max_length` (tokenizer_config.json) where the model's
    positions allow it, else `max_position_embeddings`: read from the files alone, so the
    manifest says what the workers use."""
    tokenizer_max = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        text = (folder / "tokenizer_config.json").read_text(encoding="utf-8")
        found = json.loads(text).get("model_max_length")
        tokenizer_max = int(found) if isinstance(found, (int, float)) else None
    positions = config.get("max_position_embeddings")
    if tokenizer_max is not None and tokenizer_max < 1_000_000:
        return min(tokenizer_max, positions) if positions else tokenizer_max
    if positions:
        return int(positions)
    raise CurateError("classifier: the model says no maximum length; set the model's max_length")
