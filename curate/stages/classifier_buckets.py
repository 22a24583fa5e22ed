"""Keeping or labelling documents by the percentile bucket of a classifier's score over
the whole corpus, as Nemotron-CC buckets its classifiers' scores.

```yaml
- classifier_buckets:
    models:
      - {model: models/dclm_fasttext.bin, label: hq, name: dclm}
    buckets: 20            # 0..19, each about 5% of the corpus's characters
    min_bucket: 10         # drop the documents of buckets 0..9
```

The models, their columns and how several combine are the `classifier` stage's
(`curate.classify.params`); what differs is the keep rule. A fixed threshold keeps a
share of the corpus that moves with the data; a percentile keeps the share asked for.
That needs every document's score before any can be judged, so this is a barrier:

- summarize (workers, in the pass that reads the data): each document is scored once by
  every model (a `classifier` built from the same parameters), and its weight measured.
  That summary is the basis the stage cache keeps per partition: `basis_params` holds
  only what scores and weights depend on, so changing `buckets`, `percentiles`,
  `min_bucket`, `bucket_column` or `combine` decides again from the cached scores without
  running a model.
- decide (once): the weighted percentile edges of the judged score over the whole corpus
  (`curate.classify.percentiles`: the exact rule for ties and weights), and a decision row
  per document: dropped below `min_bucket` (reason `classifier_bucket:<b>`), otherwise
  kept, carrying its scores, labels and bucket (`decision_fields`), which `apply` joins
  back on the id. So the documents are never scored twice.

Weighting is by **characters** by default: a percentile is then a share of the text, as
Nemotron-CC's is a share of the tokens, and no tokenizer need be known at this stage
(one is often chosen after filtering); for text of one language characters and tokens are
nearly proportional. `weight: documents` counts documents; `weight: field` reads an
integer column (token counts kept from the input, `weight_field: num_tokens`).

A corpus-wide decision: on an incremental run (new input files) the scores of old
partitions come from the stage cache, but the edges, and so every document's bucket, are
decided again over the whole corpus; a new file can move old documents across an edge.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.classify import percentiles as pct
from curate.classify.bucket_params import BucketParams
from curate.classify.hf_model import config_labels
from curate.classify.inspect import ScoreReport, ScoreReports, bucket_report
from curate.classify.params import ClassifierParams, combined
from curate.collective.frame import Frame, Summaries
from curate.errors import CurateError
from curate.io.batches import ID, ORDER
from curate.progress import step
from curate.stages.base import STATISTICS, BarrierStage, StageContext, StageResult
from curate.stages.classifier import REGRESSION, Classifier
from curate.stats import UNIT, Stats


class ClassifierBuckets(BarrierStage[BucketParams]):
    """Keeps or labels documents by the weighted percentile bucket of a classifier's score."""

    name = "classifier_buckets"
    sample_note = "(a barrier, on the sample alone: the corpus's edges differ)"
    """What `inspect-filter` says of running it on a sample as if it were the corpus."""
    Params = BucketParams
    reads = ("text",)
    shapes = ("text", "chat")

    def __init__(self, params: BucketParams, context: StageContext | None = None) -> None:
        super().__init__(params, context)
        # the scoring is the classifier's own, built from the same models (never drops)
        scoring = replace(self.context, stats=False, examples=0)
        self.scorer = Classifier(ClassifierParams(**params.scoring()), scoring)
        fields = list(self.scorer.output_schema(pa.schema([])))
        self.carried = [f.name for f in fields]
        if params.bucket_column is not None:
            fields.append(pa.field(params.bucket_column, pa.int32()))
        self.decision_fields = tuple(fields)

    # -- what it is ----------------------------------------------------------------------

    def columns_read(self) -> tuple[str, ...]:
        extra = (self.params.weight_field,) if self.params.weight_field else ()
        return (*super().columns_read(), *extra)

    def software(self) -> dict[str, str]:
        return self.scorer.software()

    def describe(self) -> dict[str, Any]:
        p = self.params
        return {
            **self.scorer.describe(),
            "percentiles": p.cuts(),
            "weight": p.weight_field if p.weight == "field" else p.weight,
            "edges": "the lowest score whose documents at or below it weigh at least the "
            "cut's share of the total; a document's bucket is the number of edges below its "
            "score (equal scores share a bucket)",
        }

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        for f in self.decision_fields:
            i = schema.get_field_index(f.name)
            schema = schema.set(i, f) if i >= 0 else schema.append(f)
        return schema

    def _regression(self) -> bool:
        """Whether a model is a regression (FineWeb-Edu's 0-5 score): its histogram's bins."""
        configs = [self.scorer.config(i) for i in range(len(self.params.models))]
        return any(c is not None and config_labels(c)[1] for c in configs)

    # -- summarize (workers) ---------------------------------------------------------

    def setup(self) -> None:
        self.scorer.setup()

    def basis_params(self) -> dict[str, Any]:
        """Scores depend on the models and the text; weights on `weight`: the buckets, the
        keep rule and `combine` are decided from the cached basis."""
        p = self.params
        return p.model_dump(mode="json", include={"models", "threads", "roles", "weight",
                                                  "weight_field"})  # fmt: skip

    def weights(self, batch: pa.RecordBatch) -> np.ndarray:
        p = self.params
        n = batch.num_rows
        if p.weight == "documents":
            return np.ones(n, np.int64)
        if p.weight == "characters":
            lengths = pc.utf8_length(self.document_texts(batch)).fill_null(0)
            return np.asarray(lengths.to_numpy(zero_copy_only=False), np.int64)
        column = batch.column(p.weight_field)
        if not pa.types.is_integer(column.type) or column.null_count:
            raise CurateError(
                f"classifier_buckets: weight_field '{p.weight_field}' must hold an integer "
                f"for every document (it holds {column.type}"
                + (f", {column.null_count} nulls)" if column.null_count else ")")
            )
        values = np.asarray(column.to_numpy(zero_copy_only=False), np.int64)
        if n and values.min() < 0:
            raise CurateError(
                f"classifier_buckets: weight_field '{p.weight_field}' holds a negative weight"
            )
        return values

    def summary_basis(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Each document's scores and labels (every model, once) and its weight."""
        p = self.params
        texts = [t or "" for t in self.document_texts(batch).to_pylist()]
        columns = [batch.column(ID), batch.column(ORDER)]
        names = [ID, ORDER]
        for i, (spec, pred) in enumerate(zip(p.models, self.scorer.predict(texts), strict=True)):
            score = pred.score(spec.score_label).astype(np.float32)
            columns.append(pa.array(score, pa.float32()))
            names.append(f"{spec.column_prefix}_score")
            if self.scorer.labelled(i):
                columns.append(pa.array(pred.top_labels(), pa.string()))
                names.append(f"{spec.column_prefix}_label")
        columns.append(pa.array(self.weights(batch), pa.int64()))
        names.append(pct.WEIGHT)
        return pa.RecordBatch.from_arrays(columns, names=names)

    def summary_from_basis(self, basis: pa.RecordBatch) -> pa.RecordBatch:
        """The judged score (combined under this `combine`) and its order key."""
        p = self.params
        scores = [basis.column(f"{m.column_prefix}_score").to_numpy(zero_copy_only=False)
                  for m in p.models]  # fmt: skip
        judged = combined([np.asarray(s, np.float32) for s in scores], p.combine)
        if len(p.models) > 1:
            basis = basis.append_column(p.column, pa.array(judged, pa.float32()))
        for i, s in enumerate(scores if p.bucket_by == "each" and len(scores) > 1 else []):
            keys = pct.score_keys(np.asarray(s, np.float32))
            basis = basis.append_column(pct.key_column(i), pa.array(keys, pa.uint32()))
        return basis.append_column(pct.KEY, pa.array(pct.score_keys(judged), pa.uint32()))

    def summarize(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return self.summary_from_basis(self.summary_basis(batch))

    # -- decide (once) ---------------------------------------------------------------

    def decide(self, summaries: Summaries) -> Frame:
        return self.decide_with_stats(summaries)[0]

    def judged(self) -> list[tuple[str, str]]:
        """What is bucketed: (score column, key column) of the combined score, or of each
        model's score (`bucket_by: each`)."""
        p = self.params
        if p.bucket_by == "each" and len(p.models) > 1:
            return [(f"{m.column_prefix}_score", pct.key_column(i)) for i, m in enumerate(p.models)]
        return [(p.score_column(), pct.KEY)]

    def decide_with_stats(self, summaries: Summaries) -> tuple[Frame, dict[str, Any]]:
        p = self.params
        cuts = p.cuts()
        n = p.bucket_count()
        judged = self.judged()
        rule: pct.Rule = []
        edges_by: dict[str, list[float] | None] = {}
        total = documents = 0
        for column, key in judged:
            step(f"percentile edges of {column}: {len(cuts)} cuts")
            edges, total, documents = pct.find_edges(summaries.rows([key, pct.WEIGHT]), cuts, key)
            rule.append((key, edges))
            edges_by[column] = (
                [float(v) for v in pct.key_scores(edges)] if edges is not None else None
            )
        keys = [key for _, key in judged]
        docs = np.zeros(n, np.int64)
        weight = np.zeros(n, np.int64)
        for d, w in summaries.rows([*keys, pct.WEIGHT]).fold(pct.bucket_counts, rule, n):
            docs += d
            weight += w
        step(f"bucketing {documents:,} documents")
        rows = summaries.rows([ID, ORDER, *self.carried, *keys])
        decision = rows.map(pct.decision_rows, rule, p.min_bucket, p.bucket_column,
                            self.carried, self.name, self.decision_schema())  # fmt: skip
        stats: dict[str, Any] = {
            "documents_scored": documents,
            "total_weight": total,
            "edges": edges_by if len(judged) > 1 else edges_by[judged[0][0]],
            "buckets": [self._bucket_record(b, int(docs[b]), int(weight[b])) for b in range(n)],
        }
        if self.context.stats:
            figures = Stats()
            scheme = REGRESSION if self._regression() else UNIT
            for column, _ in judged:
                marks = {f"edge_{j + 1}": e for j, e in enumerate(edges_by[column] or [])}
                figures.histogram_of_counts(
                    f"classifier_buckets/{column}",
                    summaries.rows([column]).fold(_bins, column, scheme),
                    scheme, "score", **marks,
                )  # fmt: skip
            for b in range(n):
                figures.count(f"classifier_buckets/bucket_{b}/documents", int(docs[b]))
                figures.count(f"classifier_buckets/bucket_{b}/{self._unit()}", int(weight[b]))
            stats[STATISTICS] = figures.to_dict()
        return decision, stats

    def _bucket_record(self, b: int, docs: int, weight: int) -> dict[str, Any]:
        record: dict[str, Any] = {"bucket": b, "documents": docs, "weight": weight}
        if self.params.min_bucket is not None and b < self.params.min_bucket:
            record["dropped"] = True
        return record

    def _unit(self) -> str:
        p = self.params
        return p.weight_field or "weight" if p.weight == "field" else p.weight

    # -- apply (workers) -------------------------------------------------------------

    def apply(
        self, batch: pa.RecordBatch, drop_ids: pa.Array, changes: pa.Table | None = None
    ) -> StageResult:
        """The drops, and each kept document's scores, labels and bucket from its decision
        row (joined on the id; a document with none, which a decision never leaves, gets
        nulls)."""
        kept = super().apply(batch, drop_ids).batch
        if changes is not None and changes.num_rows:
            at = pc.index_in(kept.column(ID), value_set=changes.column(ID))
        else:
            at = pa.nulls(kept.num_rows, pa.int32())
        for f in self.decision_fields:
            values = (
                pc.take(changes.column(f.name), at)
                if changes is not None and changes.num_rows
                else pa.nulls(kept.num_rows, f.type)
            )
            values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
            i = kept.schema.get_field_index(f.name)
            kept = (
                kept.set_column(i, f, values.cast(f.type))
                if i >= 0
                else kept.append_column(f, values.cast(f.type))
            )
        return StageResult(kept)

    # -- inspect-filter --------------------------------------------------------------

    def score_report(
        self, batch: pa.RecordBatch, ids: list[str], texts: list[str], examples: int
    ) -> ScoreReport | ScoreReports:
        """The judged score (or each model's, `bucket_by: each`) over a sample, its edges as
        if the sample were the corpus, and the documents either side of each edge."""
        from curate.collective.local import LocalSummaries

        p = self.params
        basis = self.summary_basis(_with_order(batch))
        summary = self.summary_from_basis(basis)
        weights = basis.column(pct.WEIGHT).to_numpy()
        reports = []
        for column, key in self.judged():
            scores = np.asarray(summary.column(column).to_numpy(zero_copy_only=False), np.float32)
            keyed = LocalSummaries.from_tables([summary]).rows([key, pct.WEIGHT])
            edges, _, _ = pct.find_edges(keyed, p.cuts(), key)
            found = [float(v) for v in pct.key_scores(edges)] if edges is not None else []
            reports.append(bucket_report(column, scores, weights, p.cuts(), found, ids, texts,
                                         examples))  # fmt: skip
        return reports[0] if len(reports) == 1 else ScoreReports(reports)


def _bins(table: pa.Table, column: str, scheme: Any) -> tuple[dict[int, int], int | None]:
    from curate.stats.bins import piece_bins

    return piece_bins(table, column, scheme)


def _with_order(batch: pa.RecordBatch) -> pa.RecordBatch:
    if ORDER in batch.schema.names:
        return batch
    from curate.io.batches import order_column

    return batch.append_column(ORDER, pa.array(order_column(0, 0, batch.num_rows), pa.uint64()))
