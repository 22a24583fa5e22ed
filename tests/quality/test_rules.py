"""Each rule removes what its published description says, and names itself."""

from __future__ import annotations

import pyarrow as pa
import pytest

from curate.stages.quality_filter import QualityFilterParams, evaluate_rules

PROSE = (
    "The committee met on Tuesday to review the proposal. Members agreed that the plan "
    "was sound, and that the budget would have to be checked with care before the vote.\n"
    "Several people raised questions about the schedule. The chair said that a revised "
    "timeline would be shared with everyone by the end of the week.\n"
    "After a short break, the discussion turned to hiring. It was decided to open two "
    "positions and to review the candidates together with the other teams.\n"
    "The meeting closed at noon. Notes will be circulated to the members of the group."
)


def first_failures(texts: list[str], **params: object) -> list[str | None]:
    p = QualityFilterParams(**params)
    out: list[str | None] = [None] * len(texts)
    for rule, fails in evaluate_rules(pa.array(texts, pa.string()), p):
        for i, f in enumerate(fails):
            if f and out[i] is None:
                out[i] = rule
    return out


def only(rule_set: str, **params: object) -> dict[str, object]:
    sets = {"gopher_quality": None, "gopher_repetition": None, "c4": None, "fineweb": None}
    return {**sets, rule_set: params}


def test_clean_prose_passes_every_rule_set() -> None:
    assert first_failures([PROSE]) == [None]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("too short to count as a document at all", "gopher_quality:min_doc_words"),
        ("supercalifragilistic " * 60, "gopher_quality:max_avg_word_length"),
        (PROSE + " #" * 80, "gopher_quality:max_hash_word_ratio"),
        (
            "\n".join(f"- item {i} of the list with the things" for i in range(60)),
            "gopher_quality:max_bullet_lines_ratio",
        ),
        (
            "\n".join(f"line {i} of the thing and the rest..." for i in range(60)),
            "gopher_quality:max_ellipsis_word_ratio",
        ),
        (
            " ".join(["1234 5678 9012 3456"] * 40) + " the and of",
            "gopher_quality:min_alpha_words_ratio",
        ),
        (" ".join(f"word{i} text" for i in range(60)), "gopher_quality:min_stop_words"),
    ],
)
def test_gopher_quality(text: str, reason: str) -> None:
    assert first_failures([text], **only("gopher_quality")) == [reason]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "gopher_repetition:empty"),
        (
            "\n\n".join(["same paragraph here."] * 5 + ["other one."]),
            "gopher_repetition:dup_para_frac",
        ),
        (
            "\n".join(["a repeated line"] * 4 + ["x", "y", "z", "w", "v"]),
            "gopher_repetition:dup_line_frac",
        ),
        (PROSE + "\n" + "wonderful extraordinary " * 40, "gopher_repetition:top_2gram_char_frac"),
    ],
)
def test_gopher_repetition(text: str, reason: str) -> None:
    assert first_failures([text], **only("gopher_repetition")) == [reason]


def test_duplicated_ngrams_name_their_size() -> None:
    block = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    text = PROSE + " " + " ".join([block] * 6)
    got = first_failures([text], **only("gopher_repetition", top_ngram_char_frac={}))
    assert got == ["gopher_repetition:dup_5gram_char_frac"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (PROSE + "\nLorem ipsum dolor sit amet, consectetur.", "c4:lorem_ipsum"),
        (PROSE + "\nThe config is {a: b} in this line.", "c4:curly_bracket"),
        ("One sentence here is fine.\nAnd a second one too.", "c4:min_sentences"),
        (PROSE.replace(".", ""), "c4:min_sentences"),
    ],
)
def test_c4(text: str, reason: str) -> None:
    assert first_failures([text], **only("c4")) == [reason]


def test_c4_skipped_lines_do_not_remove_a_page() -> None:
    # a curly bracket in a line without terminal punctuation is dropped with the line
    text = PROSE + "\nint main() {"
    assert first_failures([text], **only("c4")) == [None]
    # the policy and javascript lines are skipped, not counted as sentences
    lines = ["This site uses cookies to work well."] * 6 + ["Enable JavaScript to see it."] * 6
    assert first_failures(["\n".join(lines)], **only("c4")) == ["c4:min_sentences"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("   \n\n  ", "fineweb:empty"),
        (
            "\n".join(f"a line without an end number {i}" for i in range(20)),
            "fineweb:min_line_punct_ratio",
        ),
        ("\n".join(f"Short {i}." for i in range(20)), "fineweb:max_short_line_ratio"),
        (
            PROSE + "\n" + "\n".join(["This line repeats itself here."] * 4),
            "fineweb:max_dup_line_char_ratio",
        ),
    ],
)
def test_fineweb(text: str, reason: str) -> None:
    assert first_failures([text], **only("fineweb")) == [reason]


def test_a_rule_switched_off_lets_documents_through() -> None:
    text = "too short to count as a document at all"
    params = only("gopher_quality", min_doc_words=None, min_stop_words=None)
    assert first_failures([text], **params) == [None]


def test_rule_sets_can_be_switched_off_with_false() -> None:
    p = QualityFilterParams(c4=False, fineweb=None)
    assert p.c4 is None and p.fineweb is None and p.gopher_quality is not None


def test_unknown_rule_is_an_error() -> None:
    with pytest.raises(ValueError, match="min_dock_words"):
        QualityFilterParams(gopher_quality={"min_dock_words": 3})
