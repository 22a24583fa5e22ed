"""Pipeline: stages composed in code, on in-memory data or files, same stage objects as a run."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from conftest import corpus, write_jsonl

from curate import Pipeline


def test_process_list_of_dicts() -> None:
    p = (
        Pipeline()
        .add("normalize", form="NFKC")
        .add("filter_length", min_chars=2)
        .add("exact_dedup")
    )
    result = p.process([{"text": "ﬁne  "}, {"text": "fine"}, {"text": "x"}, {"text": "other"}])
    assert result.table.column("text").to_pylist() == ["fine", "other"]
    reasons = {(r["id"], r["reason"], r["duplicate_of"]) for r in result.rejected.to_pylist()}
    assert reasons == {("2", "too_few_chars", None), ("1", "duplicate", "0")}
    assert result.counts["2:exact_dedup"].docs_out == 2
    assert "2 rows" in repr(result)


def test_process_arrow_table_keeps_metadata() -> None:
    table = pa.table({"id": ["a", "b"], "text": ["same", "same"], "lang": ["en", "de"]})
    out = Pipeline().add("exact_dedup").process(table).table
    assert out.to_pylist() == [{"id": "a", "text": "same", "lang": "en"}]


def test_run_publishes_a_version(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", corpus(20))
    p = Pipeline().add("normalize").add("exact_dedup")
    version = p.run(
        [str(tmp_path / "a.jsonl")], name="nb", root=tmp_path / "out", output={"fsync": False}
    )
    assert version.counts["written"] == 16
    again = p.run(
        [str(tmp_path / "a.jsonl")], name="nb", root=tmp_path / "out", output={"fsync": False}
    )
    assert again.up_to_date and again.path == version.path


def test_user_mistakes_are_curate_errors() -> None:
    import pytest

    from curate import CurateError

    with pytest.raises(CurateError) as exc:
        Pipeline().add("normalise")  # at add(), not at process(): the line that is wrong
    assert type(exc.value) is CurateError  # the public type, not a private subclass
    assert str(exc.value).startswith(
        "Pipeline.add('normalise'): stages[0]: unknown stage 'normalise' "
        "(did you mean 'normalize'?); built-in stages: "
    )
    # the closest names (difflib's, best first): new *_filter stages join the list
    with pytest.raises(CurateError, match=r"did you mean ('\w+' or )*'filter_length' or '"):
        Pipeline().add("normalize").add("filter")
    pipeline = Pipeline().add("normalize")
    with pytest.raises(CurateError) as exc:
        pipeline.add("normalize", form="NFD")
    assert type(exc.value) is CurateError
    assert str(exc.value) == (
        "Pipeline.add('normalize'): stages[1].normalize.form: must be one of NFC, NFKC"
    )
    assert pipeline.entries == [{"normalize": {}}]  # the bad stage was not added
    with pytest.raises(CurateError) as exc:
        Pipeline([{"filter_length": {"min_word": 3}}])  # stages given to the constructor too
    assert str(exc.value) == (
        "Pipeline: stages[0].filter_length.min_word: unknown key 'min_word' "
        "(did you mean 'min_words'?)"
    )
    with pytest.raises(CurateError, match=r"the data has no 'text' field \(fields: body\)"):
        Pipeline().add("normalize").process([{"body": "a"}])
    kept = Pipeline(text_field="body").add("normalize").process([{"body": "a "}]).table
    assert kept.column("body").to_pylist() == ["a"]


def test_chat_records_in_memory_equal_a_run_packed(tmp_path: Path) -> None:
    """Pipeline(chat=...) reads chat records as the chat reader does (impossible ones
    quarantined with the reader's reason), runs text stages on message contents and the
    chat template, and packs as the shard writer packs: the same rows as a published run."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "chat"))
    from chat_fixtures import TEMPLATES, chat_tokenizer

    folder = chat_tokenizer(tmp_path / "tok", TEMPLATES["chatml"])
    records = [
        {"id": f"r{i}", "conversations": [{"from": "human", "value": f"question {i}  "},
                                          {"from": "gpt", "value": f"answer {i % 7}"}]}
        for i in range(30)
    ]  # fmt: skip
    records.append({"id": "dup", "conversations": records[3]["conversations"]})
    records.append({"id": "bad", "conversations": [{"from": "human", "value": "no answer"}]})
    p = (
        Pipeline(chat="sharegpt")
        .add("normalize")
        .add("exact_dedup")
        .add("chat_template", source=str(folder), pack={"seq_len": 64})
    )
    result = p.process(records)
    assert result.quarantined.to_pylist() == [{"id": "bad", "reason": "chat: no assistant turn"}]
    assert ("dup", "duplicate") in {(r["id"], r["reason"]) for r in result.rejected.to_pylist()}
    table = result.table
    assert {"input_ids", "labels", "position_ids", "cu_seqlens", "doc_ids"} <= set(
        table.schema.names
    )
    assert sum(map(len, table.column("doc_ids").to_pylist())) == 30
    assert max(table.column("num_tokens").to_pylist()) <= 64

    (tmp_path / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    version = p.run([str(tmp_path / "chat.jsonl")], name="nbchat", root=tmp_path / "out",
                    id_field="id", output={"fsync": False})  # fmt: skip
    import datasets

    written = datasets.load_from_disk(str(version.path))["train"]  # one split: no split asked
    for name in ("input_ids", "labels", "position_ids", "cu_seqlens", "doc_ids"):
        assert written[name] == table.column(name).to_pylist()
    assert version.counts["quarantined"] == 1


def test_chat_records_with_a_lone_surrogate_are_quarantined_as_the_reader_does() -> None:
    records = [
        {"id": "ok", "messages": [{"role": "user", "content": "a"},
                                  {"role": "assistant", "content": "b"}]},
        {"id": "bad", "messages": [{"role": "user", "content": "a\ud800"},
                                   {"role": "assistant", "content": "b"}]},
    ]  # fmt: skip
    result = Pipeline(chat="messages").add("normalize").process(records)
    assert result.table.column("id").to_pylist() == ["ok"]
    assert result.quarantined.to_pylist() == [
        {"id": "bad", "reason": "chat: message 0 content holds a lone surrogate (\\ud800-\\udfff)"}
    ]


def test_chat_pipeline_refuses_stages_for_text() -> None:
    import pytest

    from curate import CurateError

    with pytest.raises(CurateError, match="chat records"):
        Pipeline(chat="messages").add("tokenize", source="x")


def test_process_again_after_changing_the_last_stage_runs_only_that_stage() -> None:
    """Intermediate results are kept in memory (`keep`): a notebook that changes the last
    stage and processes the same data again pays for that stage only, and gets what a fresh
    pipeline gives."""
    records = [
        {"id": f"d{i}", "text": f"Doc {i % 7}  with words " * (1 + i % 3)} for i in range(60)
    ]
    Pipeline.forget()
    first = Pipeline().add("normalize").add("exact_dedup").add("filter_length", min_words=3)
    before = first.process(records)
    assert before.reused == []
    # the notebook cell edited and run again: a new pipeline, the same first stages
    first = Pipeline().add("normalize").add("exact_dedup").add("filter_length", min_words=8)
    after = first.process(records)
    assert after.reused == ["0:normalize", "1:exact_dedup"]
    fresh = Pipeline(keep=False).add("normalize").add("exact_dedup")
    expected = fresh.add("filter_length", min_words=8).process(records)
    assert expected.reused == []
    assert after.table.equals(expected.table)
    assert after.rejected.equals(expected.rejected)
    assert {k: c.to_dict() | {"seconds": 0} for k, c in after.counts.items()} == {
        k: c.to_dict() | {"seconds": 0} for k, c in expected.counts.items()
    }
    again = first.process(records)  # nothing changed: every stage from memory
    assert again.reused == ["0:normalize", "1:exact_dedup", "2:filter_length"]
    assert again.table.equals(expected.table)
    other = first.process(records[:30])  # other data: nothing reused
    assert other.reused == []
    assert Pipeline(keep=False).add("normalize").process(records).reused == []
