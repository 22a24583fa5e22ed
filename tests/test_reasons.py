"""Reasons never carry content (issue 14, point 5), and every reason a run writes is in the
vocabulary (`curate.reasons`).

A canary string rides in the contents, roles and keys of every shape of bad record the
readers quarantine and of documents every removing stage removes; two real `curate run`
commands (text and chat) must not write it anywhere but the shards: not in the manifest,
`rejected/`, `quarantine/`, stdout or stderr (logs at the default level), and not in the
one-line error of `on_error: fail`.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from chat.chat_fixtures import chat_tokenizer
from conftest import REPO, corpus, write_recipe

import curate
from curate.errors import CurateError

CANARY = "Qz7CanaryXq"

SAMPLES: dict[str, Any] = {
    "field": "text", "benchmark": "quiz", "type": "int64", "kind": "a string", "key": "role",
    "role": "user", "codec": "gzip", "json": "Expecting value", "arrow": "Invalid value.",
    "change": "number to string", "error": "UndefinedError", "rule": "gopher_quality:min_words",
    "code": "EMAIL_ADDRESS", "stage": "drop_keyword", "budget": "steps", "list": "ut1/adult",
}  # fmt: skip


def test_every_reason_renders_as_itself_and_only_known_values_fill_its_slots() -> None:
    from curate import reasons

    for code, reason in reasons.VOCABULARY.items():
        text = reason(**{s: SAMPLES.get(s, 3) for s in reason.slots})
        assert reasons.known(text), (code, text)
    with pytest.raises(ValueError):
        reasons.EMPTY_CONTENT(i=0, role=CANARY)  # a role outside the fixed set
    with pytest.raises(ValueError):
        reasons.MALFORMED_JSON(json=f"Invalid \\escape: {CANARY!r}", column=1)
    assert not reasons.known(f"chat: unknown role {CANARY!r} in message 0")
    assert not reasons.known(f"template_error: refused {CANARY}")


def test_parser_messages_are_kept_only_when_fixed() -> None:
    from curate import reasons

    # the pure-Python JSON scanner quotes the character; Arrow names a record's keys
    assert reasons.json_problem(f"Invalid \\escape: {CANARY!r}", 7) == "malformed JSON at column 7"
    assert (
        reasons.json_problem("Expecting value", 1) == "malformed JSON at column 1: Expecting value"
    )
    assert reasons.arrow_problem(f"Column(/{CANARY}) was specified twice") == (
        "JSON the Arrow reader rejects: a field was specified twice"
    )
    assert reasons.arrow_problem(f"Column(/{CANARY}/[]) changed from number to string") == (
        "JSON the Arrow reader rejects: a field changed from number to string"
    )
    assert reasons.arrow_problem(f"Something new about {CANARY}") == (
        "the Arrow reader rejects the line"
    )


# --- text: every shape of bad record, and every stage that removes --------------------------

SENTENCE = "the council reviewed the annual budget and approved funding for the new library"
BENCH = f"{CANARY} which planet in the solar system has the largest number of known moons today"


def _text_lines() -> list[bytes]:
    c = CANARY
    bad = [
        f'{{"id": "m1", "text": "{c} unterminated'.encode(),
        f'{{"id": "m2", "text": "\\q {c}"}}'.encode(),
        f'["{c}"]'.encode(),
        json.dumps({"id": "m4", f"{c}_key": c}).encode(),  # no text field
        json.dumps({"id": "m5", "text": {c: c}}).encode(),
        json.dumps({"id": [c], "text": "x"}).encode(),
        json.dumps({"id": "m7", "text": f"{SENTENCE} one", "source": {c: 1}}).encode(),
        f'{{"id": "m8", "text": "{SENTENCE} two", "{c}": 1, "{c}": [2]}}'.encode(),
        json.dumps({"id": "m9", "text": f"{SENTENCE} three", c: [1, "s"]}).encode(),
        f'{{"id": "m10", "text": "{c} \\ud800 lone"}}'.encode(),
        b'{"id": "m11", "text": "' + c.encode() + b' \xff\xfe"}',
        b"[" * 200_000 + c.encode(),
    ]
    removed = [
        {
            "id": "k1",
            "text": f"The library committee met on Tuesday evening to discuss {c} and "
            "the plans for the coming year, including new books, longer opening hours and a "
            "reading room for the children of the town, which everyone welcomed warmly.",
        },
        {"id": "r1", "text": c},  # filter_length: too few words
        {
            "id": "r2",
            "text": f"{c} Die Stadt hat heute beschlossen, die neue Bibliothek zu "
            "bauen, und alle Bürger freuen sich sehr darüber.",
        },
        {"id": "r3", "text": f"{c} {SENTENCE} and everyone was pleased with the plan"},
        {"id": "r4", "text": f"{c} {SENTENCE} and everyone was pleased with the plan"},
        {"id": "r5", "text": f"{c} {SENTENCE} and everyone was pleased with the plan too"},
        {"id": "r6", "text": f"Some said: {BENCH} and then the meeting ended for the day"},
        {"id": "r7", "text": f"Write to {c} at {c.lower()}@example.com about the {SENTENCE}"},
    ]
    good = [json.dumps({"id": f"g{i}", "text": f"{d['text']} {SENTENCE}"}).encode()
            for i, d in enumerate(corpus(40, dup_every=0))]  # fmt: skip
    return [*good[:20], *bad, *(json.dumps(r).encode() for r in removed), *good[20:]]


def _text_project(folder: Path) -> Path:
    data = folder / "data"
    data.mkdir(parents=True)
    (data / "a.jsonl").write_bytes(b"\n".join(_text_lines()) + b"\n")
    whole = gzip.compress(b"".join(json.dumps({"id": f"z{i}", "text": f"{CANARY} {SENTENCE}"})
                                   .encode() + b"\n" for i in range(50)))  # fmt: skip
    (data / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (data / "bad.jsonl.gz").write_bytes(whole[:20] + b"\x00" * 64 + whole[84:])
    table = pa.table({"id": ["p1", None, "p3", "p4"], "text": [CANARY, "x", None, SENTENCE],
                      "source": [CANARY, "a", "b", "c"]})  # fmt: skip
    pq.write_table(table, data / "t.parquet")
    (folder / "notes").mkdir()
    (folder / "notes" / "a.txt").write_bytes(CANARY.encode() + b" \xff\xfe broken")
    (folder / "notes" / "b.txt").write_text(f"{SENTENCE} in a note")
    (folder / "bench.jsonl").write_text(json.dumps({"question": BENCH}) + "\n")
    return write_recipe(
        folder,
        inputs=[
            "data/a.jsonl",
            "data/cut.jsonl.gz",
            "data/bad.jsonl.gz",
            "data/t.parquet",
            "notes",
        ],
        fields={"source": "string"},
        stages=[
            {"normalize": {}},
            {"filter_length": {"min_words": 3}},
            {"language_filter": {"languages": ["en"], "min_score": 0.3}},
            {"exact_dedup": {}},
            {"minhash_dedup": {"threshold": 0.7}},
            {
                "decontaminate": {
                    "benchmarks": [{"name": "quiz", "path": "bench.jsonl", "fields": ["question"]}]
                }
            },
            {"pii": {"entities": {"EMAIL_ADDRESS": "drop_document"}}},
            {
                "quality_filter": {
                    "gopher_quality": {"min_doc_words": 20},
                    "gopher_repetition": {},
                    "c4": False,
                    "fineweb": False,
                }
            },
        ],
        on_error={"mode": "quarantine", "max_quarantined": 1.0},
    )


# --- chat: every shape of impossible record, and the chat_template stage's removals ---------

TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if 'RAISEME' in m['content'] -%}{{ raise_exception('refused: ' + m['content']) }}"
    "{%- endif -%}"
    "{%- if 'UNDEFME' in m['content'] -%}{{ m[m['content']].x }}{%- endif -%}"
    "{%- if 'FAULTME' in m['content'] -%}{{ m['content'] * 1.5 }}{%- endif -%}"
    "{%- if 'LOOPME' in m['content'] -%}{%- for i in range(99999) -%}{%- for j in range(99999) -%}"
    "{%- endfor -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_start|>' + m['role'] + '\n' -}}"
    "{%- if m['role'] == 'assistant' -%}"
    "{% generation %}{{- m['content'] + '<|im_end|>' -}}{% endgeneration %}"
    "{%- else -%}{{- m['content'] + '<|im_end|>' -}}{%- endif -%}"
    "{{- '\n' -}}"
    "{%- endfor -%}"
)


def _turns(*pairs: tuple[str, Any]) -> list[dict[str, Any]]:
    return [{"role": r, "content": c} for r, c in pairs]


def _chat_lines() -> list[bytes]:
    c = CANARY
    records: list[Any] = [
        {"messages": _turns((c, "hi"), ("assistant", "ok"))},  # unknown role
        {"messages": [*_turns(("user", "hi"), ("assistant", "ok")), {"role": c, "content": 1}]},
        {"messages": c},
        {"messages": [c]},
        {"messages": [{"role": ["x", c], "content": "a"}]},
        {"messages": _turns(("user", {c: c}), ("assistant", "ok"))},
        {
            "messages": [
                {"role": "user", "content": c, "tool_calls": [c]},
                {"role": "assistant", "content": "ok"},
            ]
        },
        {"instruction": [c], "output": c},
        {c: c},
        {"messages": []},
        {"messages": _turns(("system", c), ("system", c), ("user", c), ("assistant", c))},
        {"messages": _turns(("user", c), ("system", c), ("assistant", c))},
        {"messages": _turns(("user", " "), ("assistant", c))},
        {"messages": _turns(("user", c))},
        {"conversations": [{"from": c, "value": c}, {"from": "gpt", "value": c}]},
        {"messages": _turns(("user", f"tell me about {c}"), ("assistant", f"{c} is fine"))},
        # removed by the chat_template stage
        {"messages": _turns(("user", f"RAISEME {c}"), ("assistant", c))},
        {"messages": _turns(("user", f"UNDEFME {c}"), ("assistant", c))},
        {"messages": _turns(("user", f"FAULTME {c}"), ("assistant", c))},
        {"messages": _turns(("user", f"LOOPME {c}"), ("assistant", c))},
    ]
    lines = [json.dumps(r).encode() for r in records]
    lines += [
        f'{{"messages": "{c}'.encode(),
        b'{"messages": [{"role": "user", "content": "' + c.encode() + b'\xff"}]}',
        f'{{"messages": [{{"role": "user", "content": "{c}\\ud800"}}, '
        f'{{"role": "assistant", "content": "x"}}]}}'.encode(),
        f'"{c}"'.encode(),
    ]
    good = [json.dumps({"messages": _turns(("user", f"question {i}"), ("assistant", f"answer {i}"))})
            .encode() for i in range(20)]  # fmt: skip
    return [*good[:10], *lines, *good[10:]]


def _chat_project(folder: Path) -> Path:
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "c.jsonl").write_bytes(b"\n".join(_chat_lines()) + b"\n")
    tok = chat_tokenizer(folder / "tok")
    (folder / "chat.jinja").write_text(TEMPLATE)
    recipe = write_recipe(
        folder,
        inputs=["data/c.jsonl"],
        chat={"shape": "auto"},
        stages=[
            {"normalize": {}},
            {
                "chat_template": {
                    "source": str(tok),
                    "template": "chat.jinja",
                    "keep_messages": True,
                }
            },
        ],
        on_error={"mode": "quarantine", "max_quarantined": 1.0},
    )
    cfg = yaml.safe_load(recipe.read_text())
    cfg.pop("id_field")
    recipe.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return recipe


def _run(recipe: Path) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", str(recipe)],
        capture_output=True, text=True, env=env, cwd=recipe.parent, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def _outside_the_data(version: Path) -> dict[str, str]:
    """Every file of the version but its shards and its examples (removed documents' text
    by design, passed through the recipe's pii stage: `tests/examples/`), as text (Arrow
    tables decoded)."""
    out = {}
    for path in sorted(version.rglob("*")):
        parts = path.relative_to(version).parts
        if not path.is_file() or "shards" in parts or parts[0] == "examples":
            continue
        raw = path.read_bytes()
        text = raw.decode("utf-8", "replace")
        if path.suffix == ".arrow":  # a stream (shards, side outputs) or a file (lineage)
            opened = pa.ipc.open_file if raw.startswith(b"ARROW1") else pa.ipc.open_stream
            with opened(raw) as reader:
                text += json.dumps(reader.read_all().to_pylist(), ensure_ascii=False)
        out[str(path.relative_to(version))] = text
    return out


def _reasons_written(version: Path) -> list[str]:
    found = []
    for side in ("rejected", "quarantine"):
        for path in sorted((version / side).glob("*.arrow")):
            with pa.ipc.open_stream(path.read_bytes()) as reader:
                found += reader.read_all().column("reason").to_pylist()
    manifest = json.loads((version / "manifest.json").read_text())
    found += [r for stage in manifest["stages"] for r in stage["removed"]]
    return found


@pytest.mark.parametrize("kind", ["text", "chat"])
def test_no_content_outside_the_data(tmp_path: Path, kind: str) -> None:
    recipe = _text_project(tmp_path) if kind == "text" else _chat_project(tmp_path)
    printed = _run(recipe)
    version = tmp_path / "out" / "t" / "v1"
    files = _outside_the_data(version)
    assert any(CANARY in t for t in _shard_texts(version)), "the canary never reached the data"
    assert CANARY not in printed, printed
    leaked = {name: text[text.index(CANARY) - 200 :][:400] for name, text in files.items()
              if CANARY in text}  # fmt: skip
    assert not leaked, leaked
    from curate import reasons  # after the canary check: it pins the failure at 2fe21a7

    written = _reasons_written(version)
    assert len(set(written)) >= (20 if kind == "text" else 18), sorted(set(written))
    unknown = sorted({r for r in written if not reasons.known(r)})
    assert not unknown, unknown


def _shard_texts(version: Path) -> list[str]:
    return [p.read_bytes().decode("utf-8", "replace") for p in (version / "shards").glob("*")]


def test_on_error_fail_names_the_line_not_its_content(tmp_path: Path) -> None:
    chat = _chat_project(tmp_path / "chat")
    text = _text_project(tmp_path / "text")
    for recipe, line in ((chat, _chat_lines()[10]), (text, _text_lines()[23])):
        data = recipe.parent / "data" / "one.jsonl"
        for old in (recipe.parent / "data").iterdir():
            old.unlink()
        data.write_bytes(line + b"\n")
        cfg = yaml.safe_load(recipe.read_text())
        cfg.update(inputs=["data/one.jsonl"], on_error="fail", stages=[{"normalize": {}}])
        recipe.write_text(yaml.safe_dump(cfg, sort_keys=False))
        with pytest.raises(CurateError) as exc:
            curate.run(recipe)
        assert "one.jsonl:1:" in str(exc.value)
        assert CANARY not in str(exc.value), str(exc.value)
