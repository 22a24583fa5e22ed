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
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.classify.hf_model import (
    HfModel,
    config_labels,
    declared_dtype,
    model_max_length,
    read_config,
)
from curate.classify.inspect import ScoreReport, score_report
from curate.classify.params import ClassifierParams, combined
from curate.classify.predictions import Predictions, check_label
from curate.classify.source import ModelSource, resolve_model
from curate.io.batches import ID
from curate.reasons import CLASSIFIER_ABOVE, CLASSIFIER_BELOW, CLASSIFIER_LABEL
from curate.stages import shared_work
from curate.stages.base import MapStage, StageResult, rejected_table
from curate.stats import UNIT, Stats, linear

REGRESSION = linear(0.0, 5.0, 20)
"""A regression model's scores (FineWeb-Edu's 0-5 scale) in twenty bins of 0.25."""

_REASON_CODE = re.compile(r"[^A-Za-z0-9_.\-]")


def _padded_size(item: tuple[int, dict[str, list[Any]]]) -> int:
    """A forward pass's cost: its documents padded to the longest."""
    ids = item[1]["input_ids"]
    return len(ids) * max(map(len, ids), default=0)


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
        from curate.classify import fasttext_model, hf_model

        soft: dict[str, str] = {}
        for spec, src in zip(self.params.models, self.sources(), strict=True):
            library = fasttext_model if src.kind == "fasttext" else hf_model
            soft.update(library.software())
            for file, digest in src.digests().items():
                soft[f"model_sha256:{spec.column_prefix}/{file}"] = digest
        return soft

    def config(self, index: int) -> dict[str, Any] | None:
        """A Hugging Face model's config.json (None for fastText), read once."""
        configs: dict[int, dict[str, Any] | None] = self.__dict__.setdefault("_configs", {})
        if index not in configs:
            src = self.sources()[index]
            configs[index] = read_config(src.path) if src.kind == "hf" else None
        return configs[index]

    def labelled(self, index: int) -> bool:
        """Whether a model adds a `<name>_label` column: no `label` named, and it is no
        regression (which has no labels)."""
        config = self.config(index)
        regression = config is not None and config_labels(config)[1]
        return self.params.models[index].score_label is None and not regression

    def describe(self) -> dict[str, Any]:
        p = self.params
        models = []
        for i, (spec, src) in enumerate(zip(p.models, self.sources(), strict=True)):
            record: dict[str, Any] = {
                "name": spec.column_prefix,
                "kind": src.kind,
                "source": spec.model,
                "path": str(src.path),
                "files": src.digests(),
                "score": f"P({spec.score_label})" if spec.score_label else "top label's P",
            }
            config = self.config(i)
            if config is not None:
                labels, regression = config_labels(config)
                if regression:
                    record["score"] = "the model's output (regression)"
                record.update(
                    labels=[] if regression else list(labels), device=spec.device,
                    dtype=declared_dtype(config), batch_size=spec.batch_size,
                    batch_tokens=spec.batch_tokens,
                    max_length=spec.max_length or model_max_length(src.path, config),
                )  # fmt: skip
            models.append(record)
        out: dict[str, Any] = {"models": models, "judged": p.score_column()}
        if len(p.models) > 1:
            out["combine"] = p.combine
        return out

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        p = self.params
        added = []
        for i, spec in enumerate(p.models):
            added.append(pa.field(f"{spec.column_prefix}_score", pa.float32()))
            if self.labelled(i):
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

        models: list[FastTextModel | HfModel] = []
        threads = self.params.threads or max(1, pa.cpu_count())
        for spec, src in zip(self.params.models, self.sources(), strict=True):
            model: FastTextModel | HfModel
            if src.kind == "fasttext":
                model = FastTextModel(src.path)
                regression = False
            else:
                model = HfModel(src.path, spec.device, spec.batch_size, spec.max_length, threads,
                                spec.batch_tokens)  # fmt: skip
                regression = model.regression
            check_label(spec.model, spec.score_label, model.labels, regression)
            for lab in spec.kept_labels or ():
                check_label(spec.model, lab, model.labels, regression)
            models.append(model)
        self._models = models

    def predict(self, texts: list[str]) -> list[Predictions]:
        """Each model's predictions for the texts (what inspect-filter shows too). Where the
        engine shares a stage's items (the local engine's help desk), a Hugging Face model's
        forward passes, one per group of documents batched by length, are items idle
        workers may take: the groups are made from the batch alone and each one's outputs
        depend on it alone, so the scores are the same whoever computed them."""
        return [
            model.predict(texts, partial(self._share_forward, m))
            if isinstance(model, HfModel)
            else model.predict(texts)
            for m, model in enumerate(self._loaded())
        ]

    def _loaded(self) -> list[Any]:
        """The models, loaded here first where `setup()` has not run (inspect-filter)."""
        if getattr(self, "_models", None) is None:
            self.setup()
        models: list[Any] = self._models
        return models

    def _share_forward(self, m: int, groups: list[dict[str, list[Any]]]) -> list[np.ndarray]:
        """Model `m`'s forward passes, as items idle workers may take (where nothing shares
        them, a loop: the same passes on the same groups either way)."""
        items = [(m, group) for group in groups]
        return shared_work.each(self, items, self.help_with, _padded_size)

    def help_with(self, item: tuple[int, dict[str, list[Any]]]) -> np.ndarray:
        """One forward pass of model `m` over a group of documents
        (`curate.stages.shared_work`); any worker that has set this stage up loaded the
        same model files with the same threads, so it gives the same outputs."""
        m, group = item
        model = self._loaded()[m]
        assert isinstance(model, HfModel)
        return model.forward(group)

    def score_report(
        self, batch: pa.RecordBatch, ids: list[str], texts: list[str], examples: int
    ) -> ScoreReport:
        """The judged score over a sample, for `curate inspect-filter`."""
        p = self.params
        scores = self.judged(
            self.predict([t or "" for t in self.document_texts(batch).to_pylist()])
        )
        return score_report(p.score_column(), scores, p.min_score, p.max_score, ids, texts,
                            examples)  # fmt: skip

    def judged(self, predictions: list[Predictions]) -> np.ndarray:
        """The score the bounds judge: the one model's, or the combination of several."""
        p = self.params
        scores = [pred.score(spec.score_label).astype(np.float32)
                  for spec, pred in zip(p.models, predictions, strict=True)]  # fmt: skip
        return combined(scores, p.combine)

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
        predictions = self.predict(texts)
        for i, (spec, pred) in enumerate(zip(p.models, predictions, strict=True)):
            prefix = spec.column_prefix
            score = pred.score(spec.score_label).astype(np.float32)
            out = _set(out, f"{prefix}_score", pa.array(score, pa.float32()))
            top = pred.top_labels()
            if self.labelled(i):
                out = _set(out, f"{prefix}_label", pa.array(top, pa.string()))
                counters.update(f"{prefix}_label:{lab}" for lab in top if lab is not None)
            if spec.kept_labels is not None:
                bad = ~np.isin(np.array(top, dtype=object), spec.kept_labels) & keep
                for row in np.flatnonzero(bad).tolist():
                    code = _REASON_CODE.sub("_", top[row] or "none")
                    reasons[row] = CLASSIFIER_LABEL(code=code)
                keep &= ~bad
            if self.context.stats:
                marks = {"min": p.min_score, "max": p.max_score} if len(p.models) == 1 else {}
                scheme = REGRESSION if pred.regression else UNIT
                stats.histogram(f"classifier/{prefix}", score, scheme, "score", **marks)
        judged = self.judged(predictions)
        if len(p.models) > 1:
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
