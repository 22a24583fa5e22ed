"""The `classifier_buckets` stage's recipe parameters: the classifier's models, and how the
corpus is cut into percentile buckets of their score.

```yaml
- classifier_buckets:
    models:
      - {model: models/dclm_fasttext.bin, label: hq, name: dclm}
    buckets: 20          # 20 buckets of equal weight (5% of the characters each), 0..19
    min_bucket: 10       # keep the upper half of the characters (by score)
```

`percentiles: [50, 90]` cuts at chosen shares instead (3 buckets: 0, 1, 2).
"""

from __future__ import annotations

import itertools
from typing import Literal

from pydantic import Field, field_validator, model_validator

from curate.classify.params import NAME, ScoringParams

DEFAULT_BUCKETS = 20
"""Nemotron-CC's: each classifier's scores cut into 20 percentile buckets (0-19)."""


class BucketParams(ScoringParams):
    buckets: int | None = Field(
        None,
        ge=2,
        le=1000,
        description="Cut the weight into this many buckets of equal share (0 holds the "
        "lowest scores); default 20 (Nemotron-CC's), unless `percentiles` are given.",
    )
    percentiles: list[float] | None = Field(
        None,
        min_length=1,
        description="Or cut at these shares of the weight, in percent, increasing, each "
        "between 0 and 100: k cuts make k+1 buckets.",
    )
    weight: Literal["characters", "documents", "field"] = Field(
        "characters",
        description="What a percentile counts: characters of the scored text (default; "
        "no tokenizer is needed), documents, or the integer `weight_field` (token counts).",
    )
    weight_field: str | None = Field(
        None, description="weight: field: the integer column weighing each document."
    )
    bucket_by: Literal["combined", "each"] = Field(
        "combined",
        description="Several models: bucket their combined score (`combine`), or each "
        "model's score on its own, a document taking the highest of its buckets "
        "(Nemotron-CC's ensemble).",
    )
    min_bucket: int | None = Field(
        None, ge=1, description="Drop the documents of the buckets below this one."
    )
    bucket_column: str | None = Field(
        "classifier_bucket",
        pattern=NAME.pattern,
        description="The column holding each kept document's bucket; null: none.",
    )

    @field_validator("percentiles")
    @classmethod
    def _increasing(cls, cuts: list[float] | None) -> list[float] | None:
        if cuts is None:
            return None
        for cut in cuts:
            if not 0 < cut < 100:
                raise ValueError(f"a percentile cut must lie between 0 and 100, not {cut:g}")
        for a, b in itertools.pairwise(cuts):
            if not a < b:
                raise ValueError(f"percentile cuts must increase: {a:g} then {b:g}")
        return cuts

    @model_validator(mode="after")
    def _buckets_consistent(self) -> BucketParams:
        labelled = [m.column_prefix for m in self.models if m.keep_labels is not None]
        if labelled:
            raise ValueError(
                f"model {labelled[0]!r}: keep_labels filters by label, which `classifier` "
                "does; put one before this stage"
            )
        if self.buckets is not None and self.percentiles is not None:
            raise ValueError("give `buckets` (equal shares) or `percentiles` (cuts), not both")
        if (self.weight == "field") != (self.weight_field is not None):
            raise ValueError("`weight_field` names the column of `weight: field`, and only then")
        n = self.bucket_count()
        if self.min_bucket is not None and self.min_bucket >= n:
            raise ValueError(
                f"min_bucket {self.min_bucket} would drop every document: there are {n} "
                f"buckets, 0 to {n - 1}"
            )
        if self.bucket_column is None and self.min_bucket is None:
            raise ValueError("with no `bucket_column` and no `min_bucket` the buckets are unused")
        scores = {f"{m.column_prefix}_{c}" for m in self.models for c in ("score", "label")}
        if self.bucket_column in scores | {self.column}:
            raise ValueError(f"bucket_column {self.bucket_column!r} is also a score column")
        return self

    def cuts(self) -> list[float]:
        """The cuts in percent of the total weight, increasing."""
        if self.percentiles is not None:
            return list(self.percentiles)
        n = self.buckets or DEFAULT_BUCKETS
        return [100 * i / n for i in range(1, n)]

    def bucket_count(self) -> int:
        return len(self.cuts()) + 1
