"""The `classifier` stage's recipe parameters.

```yaml
- classifier:
    models:
      - {model: models/dclm_fasttext.bin, label: hq, name: dclm}
    min_score: 0.018
```

Each model adds `<name>_score` (the probability of its `label`, or of its top label when
no label is named, or a regression model's output) and, when no `label` is named,
`<name>_label` (its top label). Several models combine into one more column, `column`
(the `combine` of their scores: max or mean), which `min_score`/`max_score` then judge;
with one model they judge its score. A model's `keep_labels` keeps only documents whose
top label is one of them. With neither a bound nor `keep_labels` the stage only labels.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from curate.chat.contents import Roles, roles_field
from curate.stage_params import StageParams

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def default_name(model: str) -> str:
    """A column prefix from the model's file or folder name (`dclm.bin` -> dclm)."""
    stem = PurePath(model.rstrip("/")).name
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return name if NAME.fullmatch(name) else f"m_{name}"


class ModelParams(StageParams):
    model: str = Field(
        description="A fastText .bin file, a Hugging Face model folder, or a hub id in the "
        "local HF cache; relative to the recipe."
    )
    kind: Literal["auto", "fasttext", "hf"] = Field(
        "auto", description="Model family; auto: a file is fastText, a folder Hugging Face."
    )
    name: str | None = Field(
        None,
        pattern=NAME.pattern,
        description="Column prefix (<name>_score, <name>_label); default: the file's name.",
    )
    label: str | None = Field(
        None,
        description="The label whose probability is the score (fastText: without "
        "__label__); none: the top label's probability, and a <name>_label column.",
    )
    keep_labels: list[str] | None = Field(
        None, min_length=1, description="Keep only documents whose top label is one of these."
    )
    device: Literal["cpu", "cuda"] = Field(
        "cpu", description="Hugging Face models: where the model runs (GPU scores differ)."
    )
    batch_size: int = Field(
        32, ge=1, description="Hugging Face models: documents per forward pass (by length)."
    )
    batch_tokens: int = Field(
        2048,
        ge=1,
        description="Hugging Face models: padded tokens per forward pass at most "
        "(a longer document runs alone); raise it on a GPU.",
    )
    max_length: int | None = Field(
        None,
        ge=1,
        description="Hugging Face models: tokens kept per document; default: "
        "the tokenizer's model_max_length, within the config's positions.",
    )

    @property
    def column_prefix(self) -> str:
        return self.name or default_name(self.model)

    @property
    def score_label(self) -> str | None:
        return self.label.removeprefix("__label__") if self.label is not None else None

    @property
    def kept_labels(self) -> list[str] | None:
        if self.keep_labels is None:
            return None
        return [lab.removeprefix("__label__") for lab in self.keep_labels]


class ScoringParams(StageParams):
    """What every classifier stage scores with: the models and how their scores combine
    (`classifier` keeps by bounds, `classifier_buckets` by percentile bucket)."""

    models: list[ModelParams] = Field(
        min_length=1, description="The models; each adds <name>_score (and <name>_label)."
    )
    combine: Literal["max", "mean"] = Field(
        "mean", description="Several models: how their scores combine into `column`."
    )
    column: str = Field(
        "classifier_score",
        pattern=NAME.pattern,
        description="Several models: the column of their combined score.",
    )
    threads: int | None = Field(
        None,
        ge=1,
        description="Hugging Face models: torch threads; default: the worker's CPU share.",
    )
    roles: Roles | None = roles_field()

    @model_validator(mode="after")
    def _distinct_columns(self) -> ScoringParams:
        names = [m.column_prefix for m in self.models]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two models have the column prefix {twice[0]!r}: give each a name")
        if len(self.models) > 1 and self.column in {f"{n}_score" for n in names}:
            raise ValueError(f"column {self.column!r} is also a model's score column")
        return self

    def score_column(self) -> str:
        """The column of the judged score: the one model's, or the combination's."""
        if len(self.models) == 1:
            return f"{self.models[0].column_prefix}_score"
        return self.column

    def scoring(self) -> dict[str, object]:
        """The fields of `ScoringParams` alone (what a `classifier` scoring the same way
        is built from)."""
        return self.model_dump(include=set(ScoringParams.model_fields))


class ClassifierParams(ScoringParams):
    min_score: float | None = Field(
        None, description="Drop documents scoring below this (the combined score, if several)."
    )
    max_score: float | None = Field(
        None, description="Drop documents scoring above this (the combined score, if several)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> ClassifierParams:
        lo, hi = self.min_score, self.max_score
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_score ({lo}) is greater than max_score ({hi})")
        return self


def combined(scores: list[np.ndarray], how: str) -> np.ndarray:
    """The judged score: the one model's, or the max or mean of several (in float64)."""
    if len(scores) == 1:
        return scores[0]
    stacked = np.stack(scores).astype(np.float64)
    out = stacked.max(axis=0) if how == "max" else stacked.mean(axis=0)
    return out.astype(np.float32)
