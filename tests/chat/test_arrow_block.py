"""curate.chat.arrow_block: Arrow's reader on clean blocks gives what the per-line path gives.

Hostile chat JSONL (valid conversations of every kind mixed with each way a line can be
wrong or merely odd) is read twice, with the fast path and with it switched off, for
several batch sizes, with and without an id field and a roles mapping: the batches (their
boundaries, ids and messages) and the quarantine (file, line, reason, bytes) must be
equal, and the fast path must have taken blocks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from curate.chat import arrow_block
from curate.chat.spec import ChatInput
from curate.io.batches import FieldSpec
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition

TEXTS = ["hello", "naïve café", "日本語", "😀 emoji", "tab\there", "  padded  ", "<|im_end|>",
         "line\nbreak", "\u3000 ideographic", "x\x00y", "quote \" and \\ slash"]  # fmt: skip


def conversation(rng: random.Random, user: str = "user") -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    if rng.random() < 0.3:
        turns.append({"role": "system", "content": rng.choice(TEXTS)})
    for _ in range(rng.randint(1, 3)):
        turns.append({"role": rng.choice(["user", user]), "content": rng.choice(TEXTS)})
        turns.append({"role": "assistant", "content": rng.choice(TEXTS)})
    return turns


def good_line(rng: random.Random, i: int, user: str) -> str:
    record: dict[str, Any] = {"id": f"r{i}" if rng.random() < 0.8 else i,
                              "messages": conversation(rng, user)}  # fmt: skip
    if rng.random() < 0.2:
        record["meta"] = {"source": "x", "n": [1, 2.5, None]}
    return json.dumps(record, ensure_ascii=rng.random() < 0.5)


def odd_line(rng: random.Random, i: int) -> str | bytes:
    """Lines the per-line path quarantines, or reads in ways Arrow might not."""
    m = conversation(rng)
    choices: list[str | bytes] = [
        "",  # blank
        "   ",
        "null",
        "[1, 2]",
        '{"id": "cut", "messages": [',
        json.dumps(
            {
                "id": f"t{i}",
                "messages": [
                    *m[:-1],
                    {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
                ],
            }
        ),
        json.dumps({"id": f"w{i}", "messages": [*m[:-1], {**m[-1], "weight": 0}]}),
        json.dumps({"id": f"w1{i}", "messages": [*m[:-1], {**m[-1], "weight": 1}]}),
        json.dumps(
            {
                "id": f"b{i}",
                "messages": [
                    {"role": "user", "content": " \n"},
                    {"role": "assistant", "content": "a"},
                ],
            }
        ),
        json.dumps(
            {"id": f"n{i}", "messages": [{"role": "user"}, {"role": "assistant", "content": "a"}]}
        ),
        json.dumps({"id": f"u{i}", "messages": [{"role": "robot", "content": "a"}]}),
        json.dumps(
            {
                "id": f"s{i}",
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "system", "content": "s"},
                    {"role": "assistant", "content": "b"},
                ],
            }
        ),
        json.dumps({"id": f"e{i}", "messages": []}),
        json.dumps({"id": f"q{i}", "messages": [{"role": "user", "content": "only"}]}),
        json.dumps({"id": True, "messages": m}),
        json.dumps({"id": 1.5, "messages": m}),
        json.dumps({"messages": m}),
        json.dumps(
            {
                "id": f"c{i}",
                "conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}],
            }
        ),
        json.dumps({"id": f"i{i}", "instruction": "do", "output": "done"}),
        f'{{"id": "d{i}", "messages": [], "messages": {json.dumps(m)}}}',
        f'{{"id": "nan{i}", "messages": {json.dumps(m)}, "x": NaN}}',
        f'{{"id": "big{i}", "messages": {json.dumps(m)}, "x": 1e999}}',
        f'{{"id": "sur{i}", "messages": [{{"role": "user", "content": "a\\ud800"}}, '
        '{"role": "assistant", "content": "b"}]}',
        b'{"id": "bad", "messages": [{"role": "user", "content": "caf\xe9"}]}',
        json.dumps({"id": f"k{i}", "messages": [{"role": "user", "content": 5}]}),
        json.dumps({"id": f"mt{i}", "messages": m}) + "\r",
        json.dumps({"id": f"two{i}", "messages": m}) + " " + json.dumps({"id": "x"}),
    ]
    return rng.choice(choices)


def write(path: Path, seed: int, n: int, odd_share: float, user: str = "user") -> None:
    rng = random.Random(seed)
    lines: list[bytes] = []
    for i in range(n):
        line = odd_line(rng, i) if rng.random() < odd_share else good_line(rng, i, user)
        lines.append(line if isinstance(line, bytes) else line.encode())
    path.write_bytes(b"\n".join(lines) + b"\n")


def read(folder: Path, fields: FieldSpec, batch_bytes: int) -> list[tuple[Any, Any]]:
    out = []
    files = discover_inputs([str(folder / "*.jsonl")], folder)
    for part in plan_partitions(files, 1 << 30):
        for chunk in read_partition(part, fields, on_error="quarantine", batch_bytes=batch_bytes):
            quarantined = [(q.file, q.line, q.reason, q.nbytes) for q in chunk.quarantined]
            out.append((chunk.batch.to_pylist(), quarantined))
    return out


@pytest.mark.parametrize("id_field", ["id", None])
@pytest.mark.parametrize("roles", [{}, {"human_alias": "user"}])
def test_fast_and_per_line_paths_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, id_field: str | None, roles: dict
) -> None:
    user = "human_alias" if roles else "user"  # a role only the mapping makes known
    write(tmp_path / "a.jsonl", seed=1, n=600, odd_share=0.04, user=user)  # mostly clean
    write(tmp_path / "b.jsonl", seed=2, n=300, odd_share=0.3, user=user)  # mostly fallbacks
    # after a few blocks in a row it cannot take, the fast path stops trying in that input
    write(tmp_path / "c.jsonl", seed=3, n=200, odd_share=0.0, user="robot")
    fields = FieldSpec("text", id_field, {}, chat=ChatInput(shape="auto", roles=roles))
    taken = []
    parse = arrow_block.ArrowChatBlocks.parse

    def counting(self: Any, lines: Any, schema: Any) -> Any:
        batch = parse(self, lines, schema)
        taken.append(batch is not None)
        return batch

    monkeypatch.setattr(arrow_block.ArrowChatBlocks, "parse", counting)
    for batch_bytes in (1, 700, 4096, 1 << 20):
        fast = read(tmp_path, fields, batch_bytes)
        with monkeypatch.context() as m:
            m.setattr(arrow_block.ArrowChatBlocks, "eligible", staticmethod(lambda *a: False))
            slow = read(tmp_path, fields, batch_bytes)
        assert fast == slow
    assert sum(taken) > 20 and not all(taken)
    reasons = [reason for _, found in slow for _, _, reason, _ in found]
    assert len(reasons) > 50
    # a lone surrogate escape is quarantined (it crashed the run: not UTF-8, not text)
    assert "chat: message 0 content holds a lone surrogate (\\ud800-\\udfff)" in reasons


def test_python_whitespace_is_the_blank_content_class() -> None:
    spaces = {chr(c) for c in arrow_block.PY_SPACE}
    assert spaces == {chr(c) for c in range(0x110000) if chr(c).isspace()}
