"""quality_filter's c4 removes lines as C4 and datatrove's C4QualityFilter do (issue 23):
the kept text, the lines counted per rule, FineWeb judging what is left, decide-only
when asked, chat records per message, and the run's counts and statistics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
from conftest import write_jsonl, write_recipe

from curate.chat.reader import messages_array
from curate.chat.spec import MESSAGES
from curate.stages.base import ORDER, StageContext, StageCounts
from curate.stages.chain import run_maps
from curate.stages.quality_filter import QualityFilter, QualityFilterParams

BODY = [
    "The committee met on Tuesday to review the proposal. Members agreed that the plan "
    "was sound, and that the budget would have to be checked with care before the vote.",
    "Several people raised questions about the schedule. The chair said that a revised "
    "timeline would be shared with everyone by the end of the week.",
    "After a short break, the discussion turned to hiring. It was decided to open two "
    "positions and to review the candidates together with the other teams.",
    "The meeting closed at noon. Notes will be circulated to the members of the group.",
]
PAGE = "\n".join(
    [
        "Home",  # no terminal punctuation
        "  " + BODY[0] + "  ",  # stripped
        "Skip ahead.",  # fewer than 3 words
        BODY[1] + "[1]",  # citation mark removed, line kept
        "Please enable JavaScript to view this site.",  # javascript
        BODY[2],
        "",  # blank: no terminal punctuation
        "Read our privacy policy before you sign up.",  # policy
        "w" * 1001 + " is a very long word.",  # a word over 1,000 characters
        "[edit] " + BODY[3],  # citation mark removed: a leading space stays, as in C4
        "About us | Contact | Careers",
    ]
)
KEPT = "\n".join([BODY[0], BODY[1], BODY[2], " " + BODY[3]])
CLEAN = "\n".join(BODY)  # what C4 leaves as it is
MENU = ["Home", "News and views", "Sport", "Weather today", "Business", "Culture",
        "Travel guides", "Future", "Our podcasts", "Contact the team"]  # fmt: skip


def batch(texts: list[str]) -> pa.RecordBatch:
    n = len(texts)
    return pa.record_batch(
        {"id": [f"d{i}" for i in range(n)], "text": texts, ORDER: np.arange(n, dtype=np.uint64)}
    )


def c4_only(**c4: object) -> QualityFilter:
    params = QualityFilterParams(
        gopher_repetition=False, gopher_quality=False, fineweb=False, c4=c4
    )
    return QualityFilter(params)


def test_kept_document_keeps_c4s_lines_counted_per_rule() -> None:
    result = c4_only().process(batch([PAGE, CLEAN]))
    assert result.removed is None
    assert result.batch.column("text").to_pylist() == [KEPT, CLEAN]
    assert result.changed == 1
    assert result.counters == {
        "lines_removed:c4:terminal_punct": 3,  # Home, the blank line, the navigation bar
        "lines_removed:c4:min_words_per_line": 1,
        "lines_removed:c4:javascript": 1,
        "lines_removed:c4:policy": 1,
        "lines_removed:c4:max_word_length": 1,
        "citations_removed:c4": 2,
    }


def test_remove_lines_false_only_decides() -> None:
    result = c4_only(remove_lines=False).process(batch([PAGE, "Too short."]))
    assert result.batch.column("text").to_pylist() == [PAGE]
    assert result.changed == 0 and not result.counters
    assert result.removed is not None
    assert result.removed.column("reason").to_pylist() == ["c4:min_sentences"]


def test_removed_documents_count_no_lines() -> None:
    curly = PAGE.replace(BODY[2], BODY[2][:-1] + " {x}.")
    result = c4_only().process(batch([curly, PAGE]))
    assert result.removed is not None
    assert result.removed.column("reason").to_pylist() == ["c4:curly_bracket"]
    assert result.counters["lines_removed:c4:javascript"] == 1  # PAGE's only


def test_fineweb_judges_the_text_c4_left() -> None:
    # ten short navigation lines: FineWeb's short-line rule removes the page as it is,
    # and keeps what C4 leaves of it
    page = "\n".join(MENU[:5] + BODY + MENU[5:])
    on = QualityFilter(QualityFilterParams()).process(batch([page]))
    assert on.removed is None and on.batch.column("text").to_pylist() == ["\n".join(BODY)]
    off = QualityFilter(QualityFilterParams(c4={"remove_lines": False})).process(batch([page]))
    assert off.removed is not None
    assert off.removed.column("reason").to_pylist() == ["fineweb:max_short_line_ratio"]


def test_explain_judges_fineweb_on_the_text_c4_left() -> None:
    page = "\n".join(MENU[:5] + BODY + MENU[5:])
    rules = dict(QualityFilter(QualityFilterParams()).explain(batch([page])))
    assert not rules["fineweb:max_short_line_ratio"].any()


def test_chat_lines_are_removed_per_message() -> None:
    convs = [
        [
            ("system", "You are terse\nAnswer in full sentences."),
            ("user", "Home\n" + BODY[0] + "\n" + BODY[1]),
            ("assistant", BODY[2] + "\nPlease enable JavaScript now, it helps.\n" + BODY[3]),
        ]
    ]
    rows = pa.RecordBatch.from_arrays(
        [pa.array(["c0"]), messages_array(convs), pa.array([0], pa.uint64())],
        names=["id", MESSAGES, ORDER],
    )
    params = QualityFilterParams(gopher_repetition=False, gopher_quality=False)
    result = QualityFilter(params, StageContext(chat=True)).process(rows)
    assert result.removed is None and result.changed == 1
    got = [(m["role"], m["content"]) for m in result.batch.column(MESSAGES).to_pylist()[0]]
    assert got == [
        ("system", "Answer in full sentences."),
        ("user", BODY[0] + "\n" + BODY[1]),
        ("assistant", BODY[2] + "\n" + BODY[3]),
    ]
    assert result.counters == {
        "lines_removed:c4:terminal_punct": 2,  # the separators between messages are no lines
        "lines_removed:c4:javascript": 1,
    }
    user_only = QualityFilterParams(roles=["user"], gopher_repetition=False, gopher_quality=False,
                                    c4={"min_sentences": 2})  # fmt: skip
    result = QualityFilter(user_only, StageContext(chat=True)).process(rows)
    got = [m["content"] for m in result.batch.column(MESSAGES).to_pylist()[0]]
    assert got == [convs[0][0][1], BODY[0] + "\n" + BODY[1], convs[0][2][1]]


def test_statistics_measure_the_characters_removed() -> None:
    stage = QualityFilter(QualityFilterParams(gopher_quality=False), StageContext(stats=True))
    counts = StageCounts()
    out = run_maps(batch([PAGE, "Too short."]), [stage], [counts], [])
    assert out.column("text").to_pylist() == [KEPT]
    sums = counts.stats.sums
    assert counts.changed == 1
    assert sums["characters_removed"] == len(PAGE) - len(KEPT)
    assert sums["characters_out"] == len(KEPT)


def test_run_records_changed_documents_and_line_counts(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", [{"id": "page", "text": PAGE},
                                                {"id": "clean", "text": CLEAN}])  # fmt: skip
    stages = [{"quality_filter": {"gopher_quality": False}}]  # PAGE has a 1,001-letter word
    from curate.runner import run

    version = run(write_recipe(tmp_path, stages=stages))
    table = version.to_arrow()
    assert dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(),
                    strict=True)) == {"page": KEPT, "clean": CLEAN}  # fmt: skip
    record = json.loads((Path(version.path) / "manifest.json").read_text())["stages"][0]
    assert record["changed"] == 1
    assert record["counters"]["lines_removed:c4:policy"] == 1
    assert record["params"]["c4"]["remove_lines"] is True
