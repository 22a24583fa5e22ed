"""What a mixture version's manifest says about the mixture (`Manifest.mixture`, `curate.mix`).

The sources are named by dataset, version and fingerprint (and where they were found), so
`curate verify` can check them and `curate gc` can keep them; per source, what was asked
(weight, target tokens) beside what was achieved (tokens to one sample, samples, epochs).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MixtureSourceRecord(_Model):
    name: str = Field(description="The source's label in mixture.yaml.")
    dataset: str
    version: str
    fingerprint: str
    path: str = Field(description="The source version's folder when the mixture was made.")
    split: str | None = Field(None, description="The split drawn from (versions with splits).")
    weight: float = Field(description="Its share of the budget's tokens (weights normalised).")
    max_epochs: float
    target_tokens: float = Field(description="budget * weight: the tokens asked of it.")
    tokens: int = Field(description="Tokens its samples hold: the target to within one sample.")
    samples: int = Field(description="Samples (rows) it gives the mixture.")
    rows: int = Field(description="Rows it holds that may be drawn (packed: full rows only).")
    epochs: float = Field(description="samples / rows: how often it is repeated.")
    shards: list[str] = Field(description="Its shards, hard-linked into this version.")


class MixtureIndex(_Model):
    path: str = Field(description="Relative to the version folder: index.arrow.")
    rows: int = Field(description="Samples in the mixture, in order.")
    bytes: int
    sha256: str


class MixtureRecord(_Model):
    """A mixture version: an index over its sources' shards, hard-linked into its folder."""

    budget: int = Field(description="Tokens asked of the whole mixture.")
    seed: int
    tokens: int = Field(description="Tokens its samples hold.")
    samples: int
    interleave: str = Field(description="How the sources' samples are ordered.")
    max_prefix_deviation: float = Field(
        description="Over every prefix of t samples and every source k, the largest "
        "|samples of k - t * share_k|: below 1."
    )
    sources: list[MixtureSourceRecord]
    index: MixtureIndex
