"""Scoring documents with model-based quality classifiers from local disk; keeping by score.

```yaml
- classifier:
    models:
      - {model: models/dclm_fasttext.bin, label: hq, name: dclm}   # DCLM's fastText
    min_score: 0.018
```

See `curate.classify.params` for what each parameter does and which columns the stage
adds, `curate.classify.fasttext_model` for how fastText models see a document (DCLM's
preprocessing). Models load once per worker in `setup()`; the files they are made of
are hashed into the fingerprint and named in the manifest. A removed document's reason
names the column that judged it (`classifier_below:dclm_score`) or the top label a
model's `keep_labels` did not hold (`classifier_label:cc`).

A conversation (chat records) is scored by the contents of its messages of the chosen
`roles` (default: all) joined by a blank line, and kept or removed whole.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.classify.params import ClassifierParams, ModelParams
from curate.classify.predictions import Predictions, check_label
from curate.classify.source import ModelSource, resolve_model
from curate.io.batches import ID
from curate.reasons import CLASSIFIER_ABOVE, CLASSIFIER_BELOW, CLASSIFIER_LABEL
from curate.stages.base import MapStage, StageResult, rejected_table
from curate.stats import UNIT, Stats

_REASON_CODE = re.compile(r"[^A-Za-z0-9_.\-]")


def _set(batch: pa.RecordBatch, name: str, values: pa.Array) -> pa.RecordBatch:
    i = batch.schema.get_field_index(name)
    return batch.set_column(i, name, values) if i >= 0 else batch.append_column(name, values)


class Classifier(MapStage[ClassifierParams]):
    """Adds each model's score (and top label); keeps by score bounds or labels."""

    name = "classifier"
    Params = ClassifierParams
    reads = ("text",)
    shapes = ("text", "chat")

    # -- what the models are (cheap: nothing is loaded) ------------------------------

    def sources(self) -> list[ModelSource]:
        found: list[ModelSource] | None = self.__dict__.get("_sources")
        if found is None:
            base = self.context.base_dir
            found = [resolve_model(m.model, base, m.kind) for m in self.params.models]
            self.__dict__["_sources"] = found
        return found

    def software(self) -> dict[str, str]:
        from curate.classify import fasttext_model

        soft: dict[str, str] = {}
        for spec, src in zip(self.params.models, self.sources(), strict=True):
            if src.kind == "fasttext":
                soft.update(fasttext_model.software())
            for file, digest in src.digests().items():
                soft[f"model_sha256:{spec.column_prefix}/{file}"] = digest
        return soft

    def labelled(self, spec: ModelParams) -> bool:
        """Whether the model adds a `<name>_label` column: no `label` named."""
        return spec.score_label is None

    def describe(self) -> dict[str, Any]:
        p = self.params
        models = []
        for spec, src in zip(p.models, self.sources(), strict=True):
            models.append(
                {
                    "name": spec.column_prefix,
                    "kind": src.kind,
                    "source": spec.model,
                    "path": str(src.path),
                    "files": src.digests(),
                    "score": f"P({spec.score_label})" if spec.score_label else "top label's P",
                }
            )
        out: dict[str, Any] = {"models": models, "judged": p.score_column()}
        if len(p.models) > 1:
            out["combine"] = p.combine
        return out

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        p = self.params
        added = []
        for spec in p.models:
            added.append(pa.field(f"{spec.column_prefix}_score", pa.float32()))
            if self.labelled(spec):
                added.append(pa.field(f"{spec.column_prefix}_label", pa.string()))
        if len(p.models) > 1:
            added.append(pa.field(p.column, pa.float32()))
        for field in added:
            i = schema.get_field_index(field.name)
            schema = schema.set(i, field) if i >= 0 else schema.append(field)
        return schema

    # -- the loaded models (once per worker) -----------------------------------------

    def setup(self) -> None:
        from curate.classify.fasttext_model import FastTextModel

        models = []
        for spec, src in zip(self.params.models, self.sources(), strict=True):
            model = FastTextModel(src.path)
            check_label(spec.model, spec.score_label, model.labels, False)
            for lab in spec.kept_labels or ():
                check_label(spec.model, lab, model.labels, False)
            models.append(model)
        self._models = models

    def predict(self, texts: list[str]) -> list[Predictions]:
        """Each model's predictions for the texts (what inspect-filter shows too)."""
        if getattr(self, "_models", None) is None:
            self.setup()
        return [model.predict(texts) for model in self._models]

    # -- the work --------------------------------------------------------------------

    def process(self, batch: pa.RecordBatch) -> StageResult:
        p = self.params
        texts = [t or "" for t in self.document_texts(batch).to_pylist()]
        n = batch.num_rows
        out = batch
        keep = np.ones(n, dtype=bool)
        reasons = np.full(n, None, dtype=object)
        counters: Counter[str] = Counter()
        stats = Stats()
        scores = []
        for spec, pred in zip(p.models, self.predict(texts), strict=True):
            prefix = spec.column_prefix
            score = pred.score(spec.score_label).astype(np.float32)
            scores.append(score)
            out = _set(out, f"{prefix}_score", pa.array(score, pa.float32()))
            top = pred.top_labels()
            if self.labelled(spec):
                out = _set(out, f"{prefix}_label", pa.array(top, pa.string()))
                counters.update(f"{prefix}_label:{lab}" for lab in top if lab is not None)
            if spec.kept_labels is not None:
                bad = ~np.isin(np.array(top, dtype=object), spec.kept_labels) & keep
                for i in np.flatnonzero(bad):
                    code = _REASON_CODE.sub("_", top[i] or "none")
                    reasons[i] = CLASSIFIER_LABEL(code=code)
                keep &= ~bad
            if self.context.stats:
                marks = {"min": p.min_score, "max": p.max_score} if len(p.models) == 1 else {}
                stats.histogram(f"classifier/{prefix}", score, UNIT, "score", **marks)
        judged = scores[0]
        if len(p.models) > 1:
            stacked = np.stack(scores).astype(np.float64)
            combined = stacked.max(axis=0) if p.combine == "max" else stacked.mean(axis=0)
            judged = combined.astype(np.float32)
            out = _set(out, p.column, pa.array(judged, pa.float32()))
            if self.context.stats:
                stats.histogram(f"classifier/{p.column}", judged, UNIT, "score",
                                min=p.min_score, max=p.max_score)  # fmt: skip
        column = p.score_column()
        for bound, below, reason in ((p.min_score, True, CLASSIFIER_BELOW),
                                     (p.max_score, False, CLASSIFIER_ABOVE)):  # fmt: skip
            if bound is None:
                continue
            bad = ((judged < bound) if below else (judged > bound)) & keep
            reasons[bad] = reason(code=column)
            keep &= ~bad
        stats_out = stats if self.context.stats else None
        if keep.all():
            return StageResult(out, counters=dict(counters), stats=stats_out)
        dropped = np.flatnonzero(~keep)
        removed = rejected_table(
            self.name, pc.take(batch.column(ID), pa.array(dropped)), list(reasons[dropped])
        )
        return StageResult(
            out.filter(pa.array(keep)), removed=removed, counters=dict(counters), stats=stats_out
        )
