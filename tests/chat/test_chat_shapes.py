"""Chat records in three shapes become one `messages` column; impossible ones are quarantined."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import pytest
from conftest import REPO, write_jsonl

from curate.chat.shapes import check, to_messages
from curate.chat.spec import ChatInput, messages_type
from curate.io.batches import FieldSpec
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition
from curate.recipe import Recipe

AUTO = ChatInput()


def read(path: Path, chat: ChatInput = AUTO, id_field: str | None = "id", **kw: object):
    files = discover_inputs([str(path)], path.parent)
    fields = FieldSpec("text", id_field, chat=chat, **kw)  # type: ignore[arg-type]
    rows, bad = [], []
    for part in plan_partitions(files, 1 << 20):
        for chunk in read_partition(part, fields, batch_bytes=64):
            assert chunk.batch.schema == fields.schema()
            rows += chunk.batch.to_pylist()
            bad += [(q.line, q.reason) for q in chunk.quarantined]
    return rows, bad


def test_three_shapes_map_to_one_messages_column() -> None:
    assert to_messages({"messages": [{"role": "user", "content": "a"},
                                     {"role": "assistant", "content": "b"}]}, AUTO) == [
        ("user", "a"), ("assistant", "b")]  # fmt: skip
    share = {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "a"},
                               {"from": "gpt", "value": "b"}]}  # fmt: skip
    assert to_messages(share, AUTO) == [("system", "s"), ("user", "a"), ("assistant", "b")]
    alpaca = {"instruction": "Do", "input": "this", "output": "done"}
    assert to_messages(alpaca, AUTO) == [("user", "Do\n\nthis"), ("assistant", "done")]
    assert to_messages({**alpaca, "input": ""}, AUTO) == [("user", "Do"), ("assistant", "done")]
    joined = ChatInput(alpaca_join="\n### Input:\n")
    assert to_messages(alpaca, joined)[0] == ("user", "Do\n### Input:\nthis")  # type: ignore[index]
    mapped = ChatInput(shape="messages", roles={"bot": "assistant"})
    msgs = {"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]}
    assert to_messages(msgs, mapped) == [("user", "a"), ("assistant", "b")]


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([("user", "a")], "chat: no assistant turn"),
        ([("user", "a"), ("assistant", " \n")], "chat: empty content in message 1 (assistant)"),
        ([("system", "a"), ("system", "b"), ("user", "c"), ("assistant", "d")],
         "chat: 2 system messages"),
        ([("user", "a"), ("system", "b"), ("assistant", "d")],
         "chat: system message at position 1, not first"),
        ([], "chat: no messages"),
    ],
)  # fmt: skip
def test_impossible_structures_get_a_reason(messages: list, reason: str) -> None:
    assert check(messages) == reason


def test_wrong_types_and_unknown_roles_are_named_without_content() -> None:
    bad = {"messages": [{"role": "user", "content": "secret"}, {"role": "robot", "content": "x"}]}
    assert to_messages(bad, AUTO) == "chat: unknown role in message 1"  # never the value
    nul = {"messages": [{"role": "user", "content": None}]}
    assert to_messages(nul, AUTO) == "chat: message 0 'content' is null, not a string"
    assert (
        to_messages({"messages": "hi"}, AUTO)
        == "chat: 'messages' is a string, not an array of messages"
    )
    assert (
        to_messages({"text": "x"}, AUTO) == "chat: no messages, conversations or instruction field"
    )
    assert (
        to_messages({"instruction": "x", "output": 3}, AUTO)
        == "chat: alpaca 'output' is a number, not a string"
    )


def test_sample_files_read_with_quarantine_reasons() -> None:
    folder = REPO / "sample_data" / "chat"
    rows, bad = read(folder / "messages.jsonl")
    assert [r["id"] for r in rows] == ["m1", "m2", "m3", "m6"]
    assert rows[0]["messages"][0] == {"role": "system", "content": "You are a terse assistant."}
    assert bad == [(4, "chat: no assistant turn"), (5, "chat: 2 system messages"),
                   (7, "malformed JSON at column 1: Expecting value")]  # fmt: skip
    rows, bad = read(folder / "sharegpt.jsonl")
    assert [r["id"] for r in rows] == ["s1", "s2", "s5"]
    assert [m["role"] for m in rows[1]["messages"]] == ["system", "user", "assistant"] * 1 + [
        "user", "assistant"]  # fmt: skip
    assert [b[1] for b in bad] == ["chat: unknown role in message 1",
                                   "chat: empty content in message 0 (user)"]  # fmt: skip
    rows, bad = read(folder / "alpaca.jsonl")
    assert [r["id"] for r in rows] == ["a1", "a2", "a3", "a5"]
    assert bad == [(4, "chat: empty content in message 1 (assistant)")]


def test_gzip_derived_ids_kept_fields_and_mixed_shapes(tmp_path: Path) -> None:
    records = [
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
         "lang": "en"},
        {"instruction": "i", "output": "o", "lang": 7},
        {"conversations": [{"from": "human", "value": "c"}, {"from": "gpt", "value": "d"}]},
    ]  # fmt: skip
    plain = write_jsonl(tmp_path / "c.jsonl", records)
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    import pyarrow as pa

    for path in (plain, gz):
        rows, bad = read(path, id_field=None, keep_fields={"lang": pa.string()})
        if path is plain:  # where the lines start in a plain file, line numbers in a compressed
            starts = [0, *itertools.accumulate(len(x) for x in plain.read_bytes().splitlines(True))]
            assert [r["id"] for r in rows] == [f"c.jsonl@{starts[0]}", f"c.jsonl@{starts[2]}"]
        else:
            assert [r["id"] for r in rows] == [f"{path.name}:1", f"{path.name}:3"]
        assert rows[0]["lang"] == "en" and rows[1]["lang"] is None
        assert bad == [(2, "field 'lang' cannot be read as string")]


def test_recipe_chat_key_is_validated_and_the_schema_says_messages() -> None:
    recipe = Recipe.from_dict({"name": "c", "inputs": ["x.jsonl"], "chat": {"shape": "sharegpt"}})
    assert recipe.chat == ChatInput(shape="sharegpt")
    assert recipe.resolved()["chat"]["shape"] == "sharegpt"
    spec = FieldSpec(chat=recipe.chat)
    assert spec.schema().field("messages").type == messages_type()
    assert "text" not in spec.schema().names


def test_keys_that_change_rendering_or_loss_are_not_silently_dropped() -> None:
    """tool_calls, OpenAI's weight: 0, reasoning: the messages column holds role and content
    only, so such a record is quarantined, never rendered or learned without them."""
    tool = {"messages": [{"role": "user", "content": "weather?"},
                         {"role": "assistant", "content": None,
                          "tool_calls": [{"type": "function", "function": {"name": "w"}}]}]}  # fmt: skip
    assert to_messages(tool, AUTO) == (
        "chat: message 1 has 'tool_calls', which curate does not carry (role and content only)"
    )
    skip = {"messages": [{"role": "user", "content": "a"},
                         {"role": "assistant", "content": "b", "weight": 0}]}  # fmt: skip
    assert "message 1 has 'weight'" in str(to_messages(skip, AUTO))
    fine = {"messages": [{"role": "user", "content": "a", "ts": 1, "tool_calls": None},
                         {"role": "assistant", "content": "b", "weight": 1}]}  # fmt: skip
    assert to_messages(fine, AUTO) == [("user", "a"), ("assistant", "b")]
