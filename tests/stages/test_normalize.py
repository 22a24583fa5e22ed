"""normalize: Unicode form, newline/control/whitespace cleanup, and honest change counts."""

from __future__ import annotations

import unicodedata

import pyarrow as pa
import pytest

from curate.stages.normalize import Normalize, NormalizeParams


def clean(texts: list[str | None], **params: object) -> list[str | None]:
    return Normalize(NormalizeParams(**params)).clean(pa.array(texts, pa.string())).to_pylist()


def test_defaults_clean_common_mess() -> None:
    raw = "\ufeffTitle  \r\nline\u200bone\x07\t \r\n\r\n\r\n\r\nend \u00a0"
    assert clean([raw]) == ["Title\nlineone\n\nend \u00a0"]


def test_nfkc_vs_nfc() -> None:
    assert clean(["ﬁ Ⅻ é"], form="NFKC") == [unicodedata.normalize("NFKC", "ﬁ Ⅻ é")]
    assert clean(["ﬁ e\u0301"], form="NFC") == ["ﬁ é"]


def test_zero_width_joiners_are_kept() -> None:
    family = "👨\u200d👩\u200d👧 می\u200cخواهم"
    assert clean([family]) == [family]


def test_code_indentation_survives_by_default() -> None:
    code = "def f():\n    return  1\n"
    assert clean([code], strip=False) == [code]
    assert clean([code], collapse_spaces=True, strip=False) == ["def f():\n return 1\n"]


def test_everything_off_is_identity_besides_form() -> None:
    raw = " a\r\n\x00 \n\n\n\nb "
    out = clean([raw], newlines=False, remove_control=False, strip=False, max_newlines=0)
    assert out == [raw]


def test_nulls_pass_through() -> None:
    assert clean([None, "a"]) == [None, "a"]


@pytest.mark.parametrize("n", [1, 3])
def test_max_newlines(n: int) -> None:
    assert clean(["a\n\n\n\n\nb"], max_newlines=n) == ["a" + "\n" * n + "b"]


def test_changed_count_and_untouched_batch() -> None:
    stage = Normalize(NormalizeParams())
    batch = pa.record_batch({"id": ["1", "2"], "text": ["clean", "dirty  "]})
    result = stage.process(batch)
    assert result.changed == 1
    assert result.batch.column(1).to_pylist() == ["clean", "dirty"]
    same = stage.process(pa.record_batch({"id": ["1"], "text": ["clean"]}))
    assert same.changed == 0


def test_unicode_version_is_recorded() -> None:
    stage = Normalize(NormalizeParams())
    assert stage.software()["unicode"] == unicodedata.unidata_version
