"""The quality rule sets' settings, apart from the rules that apply them.

A recipe is validated and fingerprinted, and a no-op `prepare()` answered, from these
models alone; the rules themselves (`curate.quality.c4` and its siblings) work on polars
and are imported only when a batch is judged. Each default is the published value; the
module of each rule set cites where it comes from and what each setting means.
"""

from __future__ import annotations

from pydantic import Field

from curate.quality.stopwords import GOPHER_STOP_WORDS
from curate.stage_params import StageParams


# C4's rules (Raffel et al. 2020, 2.2): curate.quality.c4
class C4Params(StageParams):
    min_sentences: int | None = Field(5, description="Fewest sentences in the kept lines.")
    min_words_per_line: int | None = Field(3, description="Lines with fewer words are skipped.")
    max_word_length: int | None = Field(1000, description="Lines with a longer word are skipped.")
    terminal_punct: bool = Field(True, description="Skip lines not ending in . ? ! \" '.")
    remove_citations: bool = Field(True, description="Remove [1], [edit], [citation needed].")
    lorem_ipsum: bool = Field(True, description="Remove pages with 'lorem ipsum'.")
    javascript: bool = Field(True, description="Skip lines mentioning javascript.")
    curly_bracket: bool = Field(True, description="Remove pages with '{'.")
    policy: bool = Field(True, description="Skip cookie and terms-of-use lines.")
    remove_lines: bool = Field(
        True,
        description="A kept document's text becomes its kept lines, as C4 and datatrove "
        "do (false: only decide).",
    )


# FineWeb's added rules (Penedo et al. 2024, 3.3): curate.quality.fineweb
class FineWebParams(StageParams):
    min_line_punct_ratio: float | None = Field(
        0.12, description="Fewest lines ending in terminal punctuation."
    )
    line_punct_exclude_zero: bool = Field(
        False, description="Let documents with no such line pass that rule."
    )
    max_short_line_ratio: float | None = Field(0.67, description="Most short lines.")
    short_line_length: int = Field(30, description="A short line has at most this many chars.")
    max_dup_line_char_ratio: float | None = Field(
        0.01, description="Most characters in duplicated lines."
    )
    max_newline_word_ratio: float | None = Field(0.3, description="Most newlines per word.")


# Gopher's quality rules (Rae et al. 2021, A.1.1): curate.quality.gopher_quality
class GopherQualityParams(StageParams):
    min_doc_words: int | None = Field(50, description="Fewest words (symbols not counted).")
    max_doc_words: int | None = Field(100_000, description="Most words (symbols not counted).")
    min_avg_word_length: float | None = Field(3, description="Smallest mean word length.")
    max_avg_word_length: float | None = Field(10, description="Largest mean word length.")
    max_hash_word_ratio: float | None = Field(0.1, description="Most '#' per word.")
    max_ellipsis_word_ratio: float | None = Field(0.1, description="Most ellipses per word.")
    max_bullet_lines_ratio: float | None = Field(
        0.9, description="Most lines starting with a bullet."
    )
    max_ellipsis_lines_ratio: float | None = Field(
        0.3, description="Most lines ending with an ellipsis."
    )
    min_alpha_words_ratio: float | None = Field(
        0.8, description="Fewest words containing a letter."
    )
    min_stop_words: int | None = Field(2, description="Fewest distinct stop words present.")
    stop_words: list[str] = Field(
        default_factory=lambda: list(GOPHER_STOP_WORDS), description="The stop words."
    )


# Gopher's repetition rules (Rae et al. 2021, table A1): curate.quality.gopher_repetition
class GopherRepetitionParams(StageParams):
    dup_para_frac: float | None = Field(0.3, description="Most duplicated paragraphs.")
    dup_para_char_frac: float | None = Field(
        0.2, description="Most characters in duplicated paragraphs."
    )
    dup_line_frac: float | None = Field(0.3, description="Most duplicated lines.")
    dup_line_char_frac: float | None = Field(
        0.2, description="Most characters in duplicated lines."
    )
    top_ngram_char_frac: dict[int, float] = Field(
        default_factory=lambda: {2: 0.2, 3: 0.18, 4: 0.16},
        description="n -> most characters in the most frequent n-gram ({} turns it off).",
    )
    dup_ngram_char_frac: dict[int, float] = Field(
        default_factory=lambda: {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10},
        description="n -> most characters in duplicated n-grams ({} turns it off).",
    )
