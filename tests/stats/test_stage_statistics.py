"""Stage-specific statistics: language scores, PII values by type and action, chat turns
and loss-bearing tokens; counts and bins only, never a value the stage saw."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate.chat.reader import messages_array
from curate.stages.base import StageContext, StageCounts
from curate.stages.chain import run_maps
from curate.stages.chat_template import ChatTemplate, ChatTemplateParams
from curate.stages.language_filter import LanguageFilter, LanguageFilterParams
from curate.stages.pii import Pii, PiiParams

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chat"))
from chat_fixtures import TEMPLATES, chat_tokenizer, conversations

EMAIL = "quentin.zabriskie@example.net"


def batch(texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": [f"d{i}" for i in range(len(texts))],
            "text": texts,
            "_order": pa.array(np.arange(len(texts), dtype=np.uint64)),
        }
    )


def counted(stage, b: pa.RecordBatch) -> StageCounts:  # type: ignore[no-untyped-def]
    counts = StageCounts()
    run_maps(b, [stage], [counts], [])
    return counts


def test_language_scores_per_language_with_the_minimum_marked() -> None:
    texts = [
        "The quick brown fox jumps over the lazy dog near the river bank today.",
        "Le renard brun saute par-dessus le chien paresseux près de la rivière.",
        "This is another plain English sentence about the weather and the sea.",
        "x",
    ]
    stage = LanguageFilter(LanguageFilterParams(languages=["en"], min_score=0.5))
    counts = counted(stage, batch(texts))
    sums, hist = counts.stats.sums, counts.stats.histograms
    assert sum(v for k, v in sums.items() if k.startswith("language/")) == len(texts)
    assert sums["language/en"] >= 2 and sums["language/fr"] == 1
    assert hist["language_score"].n == len(texts)
    assert hist["language_score"].marks == {"min": 0.5}
    assert hist["language_score/en"].n == sums["language/en"]
    assert "language_score/fr" not in hist  # only the languages kept get their own


def test_pii_counts_values_by_type_and_action_never_the_values() -> None:
    stage = Pii(PiiParams())
    stage.setup()
    texts = [f"Write to {EMAIL} or to {EMAIL}.", "nothing here", "call +44 20 7946 0958 now"]
    counts = counted(stage, batch(texts))
    sums = counts.stats.sums
    assert sums["values/EMAIL_ADDRESS/redact"] == 2
    assert sums["values/PHONE_NUMBER/redact"] == 1
    assert sums["documents/changed"] == 2
    per_doc = counts.stats.histograms["values_per_document"].to_dict()
    assert per_doc["n"] == 3 and per_doc["total"] == 3
    assert counts.stats.sums["characters_removed"] > 0
    assert EMAIL not in json.dumps(counts.to_dict())


def test_chat_turns_roles_and_the_loss_bearing_share(tmp_path: Path) -> None:
    chat_tokenizer(tmp_path, TEMPLATES["chatml"], eos_token="</s>")
    stage = ChatTemplate(ChatTemplateParams(source=str(tmp_path)), StageContext(chat=True))  # type: ignore[arg-type]
    stage.setup()
    convs = conversations(40)
    tuples = [[(m["role"], m["content"]) for m in c] for c in convs]
    b = pa.RecordBatch.from_arrays(
        [pa.array([f"c{i}" for i in range(len(convs))]), messages_array(tuples)], ["id", "messages"]
    )
    counts = counted(stage, b)
    sums, hist = counts.stats.sums, counts.stats.histograms
    assert hist["turns"].n == counts.docs_out
    assert hist["turns"].total == sum(v for k, v in sums.items() if k.startswith("messages/"))
    assert sums["messages/assistant"] > 0 and sums["messages/user"] > 0
    assert sums["tokens/loss"] + sums["tokens/other"] == sums["tokens_out"]
    assert 0 < sums["tokens/loss"] < sums["tokens_out"]
    assert hist["loss_share"].n == counts.docs_out
