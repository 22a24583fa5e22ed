"""curate.chat.contents: chosen message contents out of a batch and back, structure intact."""

from __future__ import annotations

import random
import re

import numpy as np
import pyarrow as pa
import xxhash

from curate.chat.contents import joined, labelled, put_back, serialized, units
from curate.chat.reader import messages_array
from curate.chat.spec import ROLES

Conv = list[tuple[str, str]]


def random_conversations(rng: random.Random, n: int) -> list[Conv]:
    words = ["é", "a\u0301", "hello", "", "\n", "\x1e", "\x1f", "7", "ünï", "🙂", "  "]
    out = []
    for _ in range(n):
        out.append(
            [
                (rng.choice(ROLES), "".join(rng.choice(words) for _ in range(rng.randint(0, 6))))
                for _ in range(rng.randint(0, 5))
            ]
        )
    return out


def batch_of(convs: list[Conv]) -> pa.RecordBatch:
    ids = pa.array([f"c{i}" for i in range(len(convs))])
    return pa.RecordBatch.from_arrays([ids, messages_array(convs)], names=["id", "messages"])


def role_sets(rng: random.Random) -> list[tuple[str, ...] | None]:
    return [None, ("user",), ("user", "assistant"), tuple(rng.sample(ROLES, 2)), ROLES]


def test_units_are_the_chosen_contents_in_order_with_their_rows() -> None:
    rng = random.Random(1)
    convs = random_conversations(rng, 200)
    for start in (0, 7):  # a sliced batch has non-zero list offsets
        part = convs[start:]
        batch = batch_of(convs).slice(start)
        for roles in role_sets(rng):
            u = units(batch, "text", True, roles)
            want = [(r, c) for r_, conv in enumerate(part) for (role, c) in [*conv]
                    for r in [r_] if roles is None or role in roles]  # fmt: skip
            assert u.texts.to_pylist() == [c for _, c in want]
            assert u.rows.tolist() == [r for r, _ in want]
            assert u.counts().tolist() == [
                sum(roles is None or role in roles for role, _ in conv) for conv in part
            ]


def test_put_back_changes_only_the_chosen_contents() -> None:
    rng = random.Random(2)
    convs = random_conversations(rng, 150)
    for start in (0, 11):
        part = convs[start:]
        batch = batch_of(convs).slice(start)
        for roles in role_sets(rng):
            u = units(batch, "text", True, roles)
            new = pa.array([f"<{t}>" for t in u.texts.to_pylist()], pa.string())
            out = put_back(batch, "text", u, new)
            assert out.schema == batch.schema
            got = out.column("messages").to_pylist()
            for before, after in zip(part, got, strict=True):
                assert [m["role"] for m in after] == [r for r, _ in before]
                assert [m["content"] for m in after] == [
                    f"<{c}>" if roles is None or r in roles else c for r, c in before
                ]
            same = put_back(batch, "text", u, u.texts)
            assert same.column("messages").to_pylist() == batch.column("messages").to_pylist()


def test_plain_text_units_are_the_text_column() -> None:
    batch = pa.record_batch({"id": ["a", "b"], "text": ["x", "y"]})
    u = units(batch, "text", False)
    assert u.texts.to_pylist() == ["x", "y"] and u.rows.tolist() == [0, 1]
    assert joined(u).to_pylist() == ["x", "y"]
    out = put_back(batch, "text", u, pa.array(["X", "Y"]))
    assert out.column("text").to_pylist() == ["X", "Y"] and out.schema == batch.schema


def test_joined_serialized_and_labelled_match_their_definitions() -> None:
    rng = random.Random(3)
    convs = random_conversations(rng, 200)
    batch = batch_of(convs)
    for roles in role_sets(rng):
        u = units(batch, "text", True, roles)
        chosen = [[(r, c) for r, c in conv if roles is None or r in roles] for conv in convs]
        assert joined(u).to_pylist() == ["\n\n".join(c for _, c in conv) for conv in chosen]
        tag = {"system": "s|", "user": "u|", "assistant": "a|", "tool": "t|"}
        assert labelled(batch, u).to_pylist() == [
            "\n\n".join(re.sub(r"(\S+)", tag[r] + r"\1", c) for r, c in conv) for conv in chosen
        ]
        assert serialized(batch, u).to_pylist() == [
            "\x1e".join(f"{r}\x1f{len(c.encode())}\x1f{c}" for r, c in conv) for conv in chosen
        ]


def test_serialization_is_unambiguous_where_a_plain_join_is_not() -> None:
    # one message holding what looks like a separator and a second turn, vs two messages
    a = [("user", "a\x1eassistant\x1f1\x1fb")]
    b = [("user", "a"), ("assistant", "b")]
    c = [("assistant", "a"), ("user", "b")]  # same contents, other speakers
    batch = batch_of([a, b, c, b])
    text = serialized(batch, units(batch, "text", True, None)).to_pylist()
    digests = [xxhash.xxh3_128_digest(t.encode()) for t in text]
    assert len(set(digests[:3])) == 3 and digests[1] == digests[3]
    assert np.array_equal(units(batch, "text", True, ("tool",)).counts(), [0, 0, 0, 0])
