"""fastText supervised models (`.bin`, `.ftz`), as DCLM scores documents with them.

DCLM (Li et al. 2024) feeds each document to its fastText classifier as one line: the
text stripped, its lines joined by single spaces (`" ".join(text.strip().splitlines())`,
baselines/mappers/enrichers/quality_prediction_enrichers_calc_fasttext.py). fastText
itself refuses a newline inside a line, so every document goes through that one
preprocessing, `one_line`, before the model sees it.

Each document is one call into fastText's C++ predict with every label asked for
(`k=-1`): the probability of each label is fastText's own (the softmax output plus its
1e-5 smoothing, so a top label may read 1.00001). DCLM derives its `hq` score from the
top label (1 - P(cc) when `cc` wins), which differs from P(hq) by at most 2e-5.

The model is run by `fasttext-predict` (a core dependency, for language_filter too): the
`fasttext` wheel's `predict` fails under numpy 2, and fasttext-predict's list call
returns no probabilities, so documents go one by one through its per-line call.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from curate.classify.predictions import Predictions
from curate.errors import CurateError, shown

PREFIX = "__label__"


def one_line(text: str) -> str:
    """A document as the single line DCLM gives fastText."""
    return " ".join(text.strip().splitlines())


def label_name(label: str) -> str:
    """A fastText label without its `__label__` prefix (how recipes and columns name it)."""
    return label.removeprefix(PREFIX)


def software() -> dict[str, str]:
    return {"fasttext-predict": version("fasttext-predict")}


class FastTextModel:
    """A loaded fastText supervised model; built once per worker."""

    def __init__(self, path: Path) -> None:
        try:
            import fasttext
        except ImportError:  # pragma: no cover - a core dependency
            raise CurateError("classifier: fastText models need fasttext-predict") from None
        try:
            self._model: Any = fasttext.load_model(str(path)).f
        except (ValueError, RuntimeError, OSError) as exc:
            raise CurateError(
                f"classifier model {shown(path)} is not a fastText model fastText can read: {exc}"
            ) from None
        found = self._model.predict("\n", -1, 0.0, "strict")
        if not found:
            raise CurateError(
                f"classifier model {shown(path)}: fastText predicts no label for an empty "
                "line (not a supervised model?)"
            )
        self.labels: tuple[str, ...] = tuple(sorted(label_name(lab) for _, lab in found))
        self._index = {PREFIX + lab: i for i, lab in enumerate(self.labels)}

    def predict(self, texts: list[str]) -> Predictions:
        """Every label's probability for each text (after `one_line`)."""
        n = len(texts)
        probs = np.zeros((n, len(self.labels)), dtype=np.float32)
        top = np.full(n, -1, dtype=np.int64)
        predict, index = self._model.predict, self._index
        for row, text in enumerate(texts):
            found = predict(one_line(text) + "\n", -1, 0.0, "strict")
            for rank, (prob, label) in enumerate(found):
                col = index.get(label)
                if col is None:  # a label the empty line did not show (hierarchical softmax)
                    continue
                probs[row, col] = prob
                if rank == 0:
                    top[row] = col
        return Predictions(self.labels, probs, top)
