"""Text stages on chat records: each gives a conversation what it gives the equivalent text.

For every text stage: a batch of conversations (built from real docstrings and scraped
text in sample_data/web) gets the same changes or decisions as the stage run on plain
text documents made of the same contents (per message for map stages that change text,
the chosen contents joined by a blank line for filters, the serialized turns for the
dedups); messages of other roles are untouched and every conversation keeps its
structure (message count, roles, order).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO, write_jsonl

from curate.chat.reader import messages_array
from curate.chat.spec import MESSAGES
from curate.collective.local import LocalSummaries
from curate.errors import CurateError
from curate.io.batches import ID
from curate.plan import check_columns
from curate.recipe import Recipe
from curate.stages.base import ORDER, REJECTED_SCHEMA, BarrierStage, MapStage, Stage, StageContext
from curate.stages.decontaminate import Decontaminate
from curate.stages.exact_dedup import ExactDedup
from curate.stages.filter_length import FilterLength
from curate.stages.language_filter import LanguageFilter
from curate.stages.minhash_dedup import MinHashDedup
from curate.stages.normalize import Normalize
from curate.stages.quality_filter import QualityFilter

Conv = list[tuple[str, str]]
ROLE_CHOICES = [None, ["user"], ["assistant"], ["system", "user"]]


def web_texts() -> list[str]:
    texts = []
    for path in sorted((REPO / "sample_data" / "web").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                text = json.loads(line).get("text")
            except json.JSONDecodeError:  # the samples hold a few broken lines on purpose
                continue
            if isinstance(text, str) and text.strip():
                texts.append(text)
    return texts


def conversations(n: int, seed: int = 9) -> list[Conv]:
    """Varied conversations: optional system prompt, 1-3 exchanges, real (and messy) text."""
    texts = web_texts()
    rng = random.Random(seed)
    out = []
    for i in range(n):
        conv: Conv = [("system", rng.choice(texts))] if i % 3 == 0 else []
        for _ in range(1 + i % 3):
            conv += [("user", rng.choice(texts)), ("assistant", rng.choice(texts))]
        out.append(conv)
    return out


def chat_batch(convs: list[Conv]) -> pa.RecordBatch:
    n = len(convs)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([f"c{i}" for i in range(n)]),
            messages_array(convs),
            pa.array(np.arange(n, dtype=np.uint64)),
        ],
        names=[ID, MESSAGES, ORDER],
    )


def text_batch(texts: list[str]) -> pa.RecordBatch:
    n = len(texts)
    return pa.record_batch(
        {ID: [f"c{i}" for i in range(n)], "text": texts, ORDER: np.arange(n, dtype=np.uint64)}
    )


def on_chat(cls: type[Stage], **params: object) -> Stage:
    stage = cls(cls.Params(**params), StageContext(chat=True))
    stage.setup()
    return stage


def on_text(cls: type[Stage], **params: object) -> Stage:
    params.pop("roles", None)
    stage = cls(cls.Params(**params), StageContext())
    stage.setup()
    return stage


def chosen(conv: Conv, roles: list[str] | None) -> list[str]:
    return [c for r, c in conv if roles is None or r in roles]


def joined_texts(convs: list[Conv], roles: list[str] | None) -> list[str]:
    return ["\n\n".join(chosen(conv, roles)) for conv in convs]


def structure(batch: pa.RecordBatch) -> list[list[str]]:
    return [[m["role"] for m in conv] for conv in batch.column(MESSAGES).to_pylist()]


def removed(result) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    if result.removed is None:
        return []
    return list(
        zip(
            result.removed.column("id").to_pylist(),
            result.removed.column("reason").to_pylist(),
            strict=True,
        )
    )


# -- map stages that change text: each chosen message as a document ----------------------


def per_message_check(cls: type[MapStage], convs: list[Conv], **params: object) -> None:
    """Each chosen message comes out as the stage makes the same text as a document."""
    roles = params.get("roles")
    batch = chat_batch(convs)
    got = on_chat(cls, **params).process(batch)  # type: ignore[attr-defined]
    flat = [c for conv in convs for c in chosen(conv, roles)]  # type: ignore[arg-type]
    want = on_text(cls, **params).process(text_batch(flat))  # type: ignore[attr-defined]
    assert not removed(got) and not removed(want)
    cleaned = iter(want.batch.column("text").to_pylist())
    assert structure(got.batch) == [[r for r, _ in conv] for conv in convs]
    changed = 0
    for conv, out in zip(convs, got.batch.column(MESSAGES).to_pylist(), strict=True):
        expect = [next(cleaned) if roles is None or r in roles else c for r, c in conv]
        assert [m["content"] for m in out] == expect
        changed += expect != [c for _, c in conv]
    assert got.changed == changed
    assert changed > 0


@pytest.mark.parametrize("roles", ROLE_CHOICES)
def test_normalize_cleans_each_chosen_message_as_a_document(roles: list[str] | None) -> None:
    convs = conversations(60)
    convs[1] = [("user", "Cafe\u0301\r\nline  \r\n\n\n\nend\u200b "), ("assistant", " ok\x07 ")]
    convs[2] = [("system", "  sys\r\n"), ("user", "x"), ("assistant", "y\t\n")]
    per_message_check(Normalize, convs, roles=roles, form="NFKC")


def test_normalize_removes_a_conversation_whose_message_it_empties() -> None:
    convs = [[("user", "hello"), ("assistant", "\u200b\x00")], [("user", "a"), ("assistant", "b ")]]
    result = on_chat(Normalize).process(chat_batch(convs))  # type: ignore[attr-defined]
    assert removed(result) == [("c0", "empty_message")]
    assert result.batch.column(MESSAGES).to_pylist() == [
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    ]
    assert result.changed == 1
    kept = on_chat(Normalize, roles=["user"]).process(chat_batch(convs))  # type: ignore[attr-defined]
    assert not removed(kept) and kept.changed == 0


# -- filters: a conversation judged as its chosen contents joined by a blank line ---------


def filter_check(cls: type[MapStage], convs: list[Conv], **params: object) -> list[tuple[str, str]]:
    roles = params.get("roles")
    got = on_chat(cls, **params).process(chat_batch(convs))  # type: ignore[attr-defined]
    want = on_text(cls, **params).process(text_batch(joined_texts(convs, roles)))  # type: ignore[attr-defined,arg-type]
    assert removed(got) == removed(want)
    assert got.batch.column(ID).to_pylist() == want.batch.column(ID).to_pylist()
    kept = set(got.batch.column(ID).to_pylist())
    originals = [conv for i, conv in enumerate(convs) if f"c{i}" in kept]
    assert [
        [(m["role"], m["content"]) for m in conv] for conv in got.batch.column(MESSAGES).to_pylist()
    ] == originals
    assert got.counters == want.counters
    return removed(got)


@pytest.mark.parametrize("roles", ROLE_CHOICES)
def test_filter_length_judges_the_joined_contents(roles: list[str] | None) -> None:
    gone = filter_check(FilterLength, conversations(80), roles=roles, min_words=40, max_chars=3000)
    assert 0 < len(gone) < 80


@pytest.mark.parametrize("roles", ROLE_CHOICES)
def test_quality_filter_judges_the_joined_contents(roles: list[str] | None) -> None:
    gone = filter_check(  # C4 only deciding: kept conversations stay whole (line removal,
        QualityFilter,  # per message: tests/quality/test_c4_line_removal.py)
        conversations(80),
        roles=roles,
        gopher_quality={"min_doc_words": 20},
        c4={"remove_lines": False},
    )
    assert 0 < len(gone) < 80
    assert all(
        reason.split(":")[0] in {"gopher_quality", "gopher_repetition", "c4", "fineweb"}
        for _, reason in gone
    )


@pytest.mark.parametrize("roles", [None, ["user"]])
def test_language_filter_labels_the_conversation(roles: list[str] | None) -> None:
    convs = conversations(30)
    convs[4] = [
        ("user", "Écris « bonjour » en Python, s'il te plaît, avec une explication."),
        ("assistant", "Voici comment on écrit bonjour en Python avec la fonction print."),
    ]
    convs[5] = [
        ("user", "Il faisait très beau aujourd'hui, alors nous avons marché longtemps."),
        (
            "assistant",
            "The weather was lovely today, so we walked along the river to the old mill, "
            "had lunch by the water and came back home in the late afternoon, just before "
            "the rain started and the wind turned cold.",
        ),
    ]
    gone = filter_check(LanguageFilter, convs, roles=roles, languages=["en"], min_score=0.5)
    assert ("c4", "language:fr") in gone
    assert (("c5", "language:fr") in gone) == (roles == ["user"])


# -- barriers: the dedups compare the chosen turns, role and content -------------------------


def decide(stage: BarrierStage, batch: pa.RecordBatch) -> list[tuple[str, str]]:
    decision = stage.decide(LocalSummaries.from_tables([stage.summarize(batch)]))
    if hasattr(decision, "collect"):  # a frame the engine holds (issue 7's collectives)
        decision = decision.collect(pa.schema([*REJECTED_SCHEMA, pa.field(ORDER, pa.uint64())]))
    table = decision
    return sorted(
        zip(table.column("id").to_pylist(), table.column("duplicate_of").to_pylist(), strict=True)
    )


def test_exact_dedup_compares_the_chosen_turns() -> None:
    a = [("system", "Be brief."), ("user", "What is 2+2?"), ("assistant", "4.")]
    convs = [
        a,
        list(a),  # c1: the same conversation
        [("system", "Be verbose."), *a[1:]],  # c2: another system prompt
        [
            ("system", "Be brief."),
            ("assistant", "What is 2+2?"),
            ("user", "4."),
        ],  # c3: roles swapped
        [("user", "What is 2+2?"), ("assistant", "4.")],  # c4: no system prompt
        [("user", "What is 2+2?\n\n4.")],  # c5: one message holding both
    ]
    batch = chat_batch(convs)
    assert decide(on_chat(ExactDedup), batch) == [("c1", "c0")]  # type: ignore[arg-type]
    assert decide(on_chat(ExactDedup, roles=["user", "assistant"]), batch) == [  # type: ignore[arg-type]
        ("c1", "c0"),
        ("c2", "c0"),
        ("c4", "c0"),
    ]
    # conversations without a chosen message have nothing to compare: no summary, kept
    system_only = on_chat(ExactDedup, roles=["system"])
    assert system_only.summarize(batch).column(ID).to_pylist() == ["c0", "c1", "c2", "c3"]  # type: ignore[attr-defined]
    assert decide(system_only, batch) == [("c1", "c0"), ("c3", "c0")]  # type: ignore[arg-type]


def test_exact_dedup_digest_is_of_the_serialized_turns() -> None:
    import xxhash

    convs = conversations(40)
    convs[7] = list(convs[3])
    stage = on_chat(ExactDedup, roles=["user", "assistant"])
    digests = stage.summarize(chat_batch(convs)).column("digest").to_pylist()  # type: ignore[attr-defined]
    want = [
        xxhash.xxh3_128_digest(
            "\x1e".join(
                f"{r}\x1f{len(c.encode())}\x1f{c}" for r, c in conv if r != "system"
            ).encode()
        )
        for conv in convs
    ]
    assert digests == want
    assert decide(stage, chat_batch(convs)) == [("c7", "c3")]  # type: ignore[arg-type]


@pytest.mark.parametrize("roles", [None, ["assistant"]])
def test_minhash_signatures_are_those_of_the_speaker_tagged_turns(
    roles: list[str] | None,
) -> None:
    convs = conversations(50)
    chat = on_chat(MinHashDedup, roles=roles)
    text = on_text(MinHashDedup)
    tag = {"system": "s|", "user": "u|", "assistant": "a|"}
    labelled = [
        "\n\n".join(
            re.sub(r"(\S+)", tag[r] + r"\1", c) for r, c in conv if roles is None or r in roles
        )
        for conv in convs
    ]
    got = chat.summarize(chat_batch(convs))  # type: ignore[attr-defined]
    want = text.summarize(text_batch(labelled))  # type: ignore[attr-defined]
    assert got.equals(want)


def test_minhash_finds_a_near_duplicate_conversation() -> None:
    convs = conversations(40)
    answer = " ".join(web_texts()[:6])
    base = [("user", "Explain these modules."), ("assistant", answer)]
    near = [
        ("user", "Explain these modules, please."),
        ("assistant", answer.replace("the", "a", 1)),
    ]
    swapped = [("assistant", "Explain these modules."), ("user", answer)]
    convs[10], convs[30], convs[35] = base, near, swapped
    found = decide(on_chat(MinHashDedup), chat_batch(convs))  # type: ignore[arg-type]
    assert ("c30", "c10") in found
    assert all(pair[0] != "c35" for pair in found)  # every word is tagged with its speaker


# -- decontaminate: each chosen message on its own ----------------------------------------

QUESTION = (
    "which container keeps insertion order and gives fast appends and pops on "
    "either end of the sequence"
)


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "bench.jsonl", [{"id": "q", "question": QUESTION}])
    return tmp_path


def decontaminate(base: Path, chat: bool = True, **params: object) -> Decontaminate:
    quiz = {"name": "quiz", "path": "bench.jsonl", "fields": ["question"]}
    stage = Decontaminate(
        Decontaminate.Params(benchmarks=[quiz], **params),
        StageContext(base_dir=str(base), chat=chat),
    )
    stage.setup()
    return stage


def test_decontaminate_drops_conversations_with_a_contaminated_message(bench: Path) -> None:
    words = QUESTION.split()
    convs = conversations(12)
    convs[2] = [("user", f"Quiz: {QUESTION.capitalize()}?"), ("assistant", "A deque.")]
    convs[5] = [("system", QUESTION), ("user", "hi"), ("assistant", "hello")]
    # the n-gram runs from one message into the next: no message holds it
    convs[7] = [("user", " ".join(words[:7])), ("assistant", " ".join(words[7:]))]
    convs[9] = [("user", "Tell me"), ("assistant", f"Sure. {QUESTION}; a deque!")]
    result = decontaminate(bench).process(chat_batch(convs))
    assert removed(result) == [("c2", "benchmark:quiz"), ("c9", "benchmark:quiz")]
    assert result.counters == {"benchmark:quiz": 2}
    with_system = decontaminate(bench, roles=["system", "user", "assistant"])
    assert [i for i, _ in removed(with_system.process(chat_batch(convs)))] == ["c2", "c5", "c9"]
    joined = decontaminate(bench, chat=False).process(
        text_batch(["\n\n".join(c for _, c in convs[7])])
    )
    assert removed(joined) == [("c0", "benchmark:quiz")]  # as one text it would have matched


def test_decontaminate_cut_cuts_inside_the_message(bench: Path) -> None:
    convs = conversations(10)
    convs[1] = [
        ("system", "Be kind."),
        ("user", f"First line.\n{QUESTION}\nLast line."),
        ("assistant", "Use a deque."),
    ]
    convs[4] = [("user", "Quiz"), ("assistant", QUESTION)]  # the whole message would go
    result = decontaminate(bench, action="cut").process(chat_batch(convs))
    assert removed(result) == [("c4", "benchmark:quiz")]
    assert result.changed == 1
    text = decontaminate(bench, chat=False, action="cut").process(text_batch([convs[1][1][1]]))
    out = {
        i: conv
        for i, conv in zip(
            result.batch.column(ID).to_pylist(),
            result.batch.column(MESSAGES).to_pylist(),
            strict=True,
        )
    }
    assert [m["content"] for m in out["c1"]] == [
        "Be kind.",
        text.batch.column("text")[0].as_py(),
        "Use a deque.",
    ]
    assert out["c1"][1]["content"] == "First line.\nLast line."
    for i in (0, 2, 3, 5):
        assert [(m["role"], m["content"]) for m in out[f"c{i}"]] == convs[i]


# -- pii: each chosen message as plain Presidio would make it --------------------------------

PLANTED = [
    [
        ("user", "Write to ann.lee@example.com or call +44 20 7946 0958."),
        ("assistant", "I will mail ann.lee@example.com today."),
    ],
    [
        ("system", "Support line: 212-555-0100."),
        ("user", "My card is 4111 1111 1111 1111."),
        ("assistant", "Never share 4111-1111-1111-1111 here."),
    ],
    [("user", "No personal data here."), ("assistant", "Good.")],
]


@pytest.mark.parametrize("roles", [None, ["user"], ["assistant", "system"]])
def test_pii_replaces_each_chosen_message_as_plain_presidio(roles: list[str] | None) -> None:
    pytest.importorskip("presidio_analyzer")
    from presidio_anonymizer import AnonymizerEngine
    from presidio_anonymizer.entities import OperatorConfig

    from curate.pii.analyzer import Analysis, AnalyzerConfig
    from curate.stages.pii import DEFAULT_ENTITIES, Pii

    convs = conversations(20) + PLANTED
    stage = on_chat(Pii, roles=roles)
    result = stage.process(chat_batch(convs))  # type: ignore[attr-defined]
    plain = Analysis(AnalyzerConfig(("en",), tuple(DEFAULT_ENTITIES), 0.4, fast=False))
    engine = AnonymizerEngine()
    ops = {e: OperatorConfig("replace") for e in DEFAULT_ENTITIES}
    assert structure(result.batch) == [[r for r, _ in conv] for conv in convs]
    changed = 0
    for conv, out in zip(convs, result.batch.column(MESSAGES).to_pylist(), strict=True):
        want = []
        for role, content in conv:
            if roles is None or role in roles:
                found = plain.engine.analyze(
                    content, language="en", entities=list(DEFAULT_ENTITIES), score_threshold=0.4
                )
                content = engine.anonymize(content, found, ops).text
            want.append(content)
        assert [m["content"] for m in out] == want
        changed += want != [c for _, c in conv]
    assert changed > 0 and result.changed == changed
    assert result.counters["documents/changed"] == changed
    text_stage = on_text(Pii)
    flat = [c for conv in convs for c in chosen(conv, roles)]
    text_counters = text_stage.process(text_batch(flat)).counters  # type: ignore[attr-defined]
    for key, n in text_counters.items():  # the same values found, counted per message
        if key.startswith("values/"):
            assert result.counters[key] == n
        elif key.startswith("documents/"):
            assert result.counters["messages/" + key.split("/")[1]] == n
    leaked = json.dumps(result.counters)
    assert "example.com" not in leaked and "4111" not in leaked


def test_pii_drop_document_counts_values_over_the_conversation() -> None:
    pytest.importorskip("presidio_analyzer")
    from curate.stages.pii import Pii

    rule = {"CREDIT_CARD": {"action": "drop_document", "above": 1}}
    result = on_chat(Pii, entities=rule).process(chat_batch(PLANTED))  # type: ignore[attr-defined]
    assert removed(result) == [("c1", "pii:CREDIT_CARD")]  # one card per message, two in all
    assert result.counters["documents/dropped"] == 1
    assert result.counters["values/CREDIT_CARD/drop_document"] == 2
    only_user = on_chat(Pii, entities=rule, roles=["user"]).process(chat_batch(PLANTED))  # type: ignore[attr-defined]
    assert not removed(only_user)
    kept = only_user.batch.column(MESSAGES).to_pylist()[1]
    assert kept[1]["content"] == "My card is <CREDIT_CARD>."
    assert kept[2]["content"] == "Never share 4111-1111-1111-1111 here."


# -- the plan: stages checked against the record shape before data moves -------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return path


def test_a_text_only_stage_on_chat_records_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: t\ninputs: [a.jsonl]\nchat: {}\nstages:\n"
        "  - normalize: {roles: [user]}\n  - tokenize: {source: tok}\n",
    )
    with pytest.raises(CurateError) as err:
        Recipe.load(path)
    assert str(err.value) == (
        f"{path}:6: stages[1].tokenize: works on text documents, but this recipe reads "
        "chat records (chat:)"
    )


def test_roles_and_chat_stages_on_text_records_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: t\ninputs: [a.jsonl]\nstages:\n  - exact_dedup:\n"
        "      roles: [user]\n  - chat_template: {source: tok}\n",
    )
    with pytest.raises(CurateError) as err:
        Recipe.load(path)
    assert str(err.value).splitlines() == [
        f"{path}:5: stages[0].exact_dedup.roles: chooses messages of chat records; "
        "this recipe reads text",
        f"{path}:6: stages[1].chat_template: works on chat records, but this recipe reads text "
        "(no chat: key)",
    ]


def test_roles_are_checked_and_stages_read_messages_on_chat() -> None:
    with pytest.raises(CurateError, match=r"stages\[0\]\.pii\.roles\[0\]: must be one of"):
        Recipe.from_dict(
            {"name": "t", "inputs": ["a"], "chat": {}, "stages": [{"pii": {"roles": ["bot"]}}]}
        )
    with pytest.raises(CurateError, match=r"stages\[0\]\.quality_filter\.roles"):
        Recipe.from_dict(
            {
                "name": "t",
                "inputs": ["a"],
                "chat": {},
                "stages": [{"quality_filter": {"roles": []}}],
            }
        )
    from curate.chat.spec import ChatInput

    schema = ChatInput().batch_schema({})
    stages = [on_chat(Normalize), on_chat(ExactDedup), on_chat(MinHashDedup)]
    assert [s.columns_read() for s in stages] == [(MESSAGES,)] * 3
    assert check_columns(stages, schema) == schema
    with pytest.raises(CurateError, match="reads column 'text'"):
        check_columns([on_text(Normalize)], schema)


# -- end to end: the fine-tuning recipe on sample_data/chat, read back with datasets -------


def test_finetune_recipe_curates_conversations_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("presidio_analyzer")
    import shutil

    import datasets

    import curate

    shutil.copytree(REPO / "sample_data" / "chat", tmp_path / "sample_data" / "chat")
    (tmp_path / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "finetune-chat.yaml", tmp_path / "recipes")
    version = curate.run(tmp_path / "recipes" / "finetune-chat.yaml")
    manifest = json.loads((Path(version.path) / "manifest.json").read_text())
    stages = {s["name"]: s for s in manifest["stages"]}
    counts = {
        name: (s["docs_in"], s["docs_out"], s["changed"], s["removed"])
        for name, s in stages.items()
    }
    assert counts["normalize"] == (16, 16, 1, {})  # m6-again's CRLF and trailing spaces
    assert counts["exact_dedup"] == (16, 15, 0, {"duplicate": 1})
    assert counts["minhash_dedup"] == (15, 14, 0, {"near_duplicate": 1})
    assert counts["quality_filter"] == (14, 13, 0, {"gopher_repetition:dup_line_frac": 1})
    assert counts["pii"] == (13, 13, 1, {})
    assert stages["pii"]["counters"]["values/EMAIL_ADDRESS/redact"] == 2
    assert stages["pii"]["counters"]["messages/changed"] == 2
    assert stages["quality_filter"]["params"]["roles"] == ["assistant"]
    rejected = pa.concat_tables(
        pa.ipc.open_stream(p).read_all()
        for p in sorted(Path(version.path, "rejected").glob("*.arrow"))
    ).to_pydict()
    assert sorted(zip(rejected["id"], rejected["duplicate_of"], strict=True)) == [
        ("m6-again", "m6"),
        ("m7-reworded", "m7"),
        ("m9", None),
    ]

    ds = datasets.load_from_disk(version.path)["train"]  # its one split (no split: asked)
    assert len(ds) == 13 and {"input_ids", "labels", "num_tokens"} <= set(ds.column_names)
    assert sorted(ds["id"]) == sorted(
        ["m1", "m2", "m3", "m6", "m7", "m8", "s1", "s2", "s5", "a1", "a2", "a3", "a5"]
    )
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(
        str(tmp_path / "sample_data" / "chat" / "tokenizer" / "tokenizer.json")
    )
    row = ds[ds["id"].index("m8")]
    text = tok.decode(row["input_ids"], skip_special_tokens=False)
    assert "<EMAIL_ADDRESS>" in text and "jane.doe" not in text
    for shard in Path(version.path, "shards").glob("*.arrow"):
        assert b"jane.doe" not in shard.read_bytes()
    assert b"jane.doe" not in (Path(version.path) / "manifest.json").read_bytes()


def test_inspect_filter_shows_what_a_filter_judged_a_conversation_by(tmp_path: Path) -> None:
    import shutil

    from curate.inspect_filter import inspect_filter

    shutil.copytree(REPO / "sample_data" / "chat", tmp_path / "sample_data" / "chat")
    (tmp_path / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "finetune-chat.yaml", tmp_path / "recipes")
    report = inspect_filter(tmp_path / "recipes" / "finetune-chat.yaml", "quality_filter")
    assert report.documents == 16 and report.skipped_barriers == ["exact_dedup", "minhash_dedup"]
    assert report.first == {"gopher_repetition:dup_line_frac": 1}
    [(doc_id, text)] = report.examples["gopher_repetition:dup_line_frac"]
    assert doc_id == "m9" and text == "\n".join(["I can help with that."] * 6)  # assistant only
