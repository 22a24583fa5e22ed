"""What a classifier model returns for a list of texts, whatever its library."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from curate.errors import CurateError


@dataclass(frozen=True)
class Predictions:
    """One row per text: a probability per label (or one regression output), and the
    index of the model's top label (-1 where it gave none)."""

    labels: tuple[str, ...]
    """The column names of `probs`: the model's labels (fastText's without `__label__`)."""
    probs: np.ndarray
    """(texts, labels) float32; a regression model's single output is its one column."""
    top: np.ndarray
    """(texts,) int: the index in `labels` of each text's top label, -1 where none."""
    regression: bool = False

    def score(self, label: str | None) -> np.ndarray:
        """The score of each text: a regression model's output, the probability of
        `label`, or (no label named) the probability of the text's top label."""
        if self.regression:
            return self.probs[:, 0]
        if label is not None:
            return self.probs[:, self.labels.index(label)]
        rows = np.arange(len(self.top))
        return np.where(self.top >= 0, self.probs[rows, np.maximum(self.top, 0)], 0.0).astype(
            np.float32
        )

    def top_labels(self) -> list[str | None]:
        return [self.labels[i] if i >= 0 else None for i in self.top.tolist()]


def check_label(model: str, label: str | None, labels: tuple[str, ...], regression: bool) -> None:
    """A recipe's `label` must be one the model has; a regression model has none."""
    if label is None:
        return
    if regression:
        raise CurateError(
            f"classifier model '{model}': a regression model (one output) has no label "
            f"'{label}' to score; leave `label` out"
        )
    if label not in labels:
        raise CurateError(
            f"classifier model '{model}' has no label '{label}'; its labels: "
            + ", ".join(labels[:20])
            + (" ..." if len(labels) > 20 else "")
        )
