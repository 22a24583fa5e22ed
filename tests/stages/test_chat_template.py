"""The chat_template stage against the reference rendering, tokenization and assistant mask.

For each template style (ChatML, ChatML with {% generation %}, Llama-3 headers, Mistral
[INST]) and a few hundred varied conversations: the rendered text equals transformers'
rendering, the ids equal that text tokenized by `tokenizers` (special tokens parsed,
none added), the mask equals transformers' assistant mask where the template has
generation blocks, and everywhere the unmasked tokens decode to exactly each assistant
content plus the end-of-turn token.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curate.chat.reader import messages_array
from curate.stages.base import StageContext
from curate.stages.chat_template import ChatTemplate, ChatTemplateParams

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chat"))
from chat_fixtures import EOT, TEMPLATES, chat_tokenizer, conversations, hf_render

N = 300
SPECIALS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


def make(folder: Path, style: str, **params: object) -> ChatTemplate:
    chat_tokenizer(folder, TEMPLATES[style], eos_token="</s>")
    stage = ChatTemplate(ChatTemplateParams(source=str(folder), **params), StageContext())  # type: ignore[arg-type]
    stage.setup()
    return stage


def batch_of(convs: list[list[dict[str, str]]]) -> pa.RecordBatch:
    tuples = [[(m["role"], m["content"]) for m in c] for c in convs]
    ids = pa.array([f"c{i}" for i in range(len(convs))])
    return pa.RecordBatch.from_arrays([ids, messages_array(tuples)], ["id", "messages"])


def reference_tokenizer(folder: Path):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def hf_generation_mask(template: str, messages: list[dict[str, str]], tok) -> list[int]:  # type: ignore[no-untyped-def]
    """transformers' return_assistant_tokens_mask: generation spans (found here with markers
    in place of the tag, independently of the stage's tracker), then char_to_token."""
    marked = template.replace("{%- generation %}", "{{- '\\x01' }}").replace(
        "{%- endgeneration %}", "{{- '\\x02' }}"
    )
    raw = hf_render(marked, messages, SPECIALS)
    spans, text, start = [], "", 0
    for ch in raw:
        if ch == "\x01":
            start = len(text)
        elif ch == "\x02":
            spans.append((start, len(text)))
        else:
            text += ch
    enc = tok.encode(text, add_special_tokens=False)
    mask = [0] * len(enc.ids)
    for s, e in spans:
        first, last = enc.char_to_token(s), enc.char_to_token(e - 1)
        if first is None:
            continue
        for i in range(first, last + 1 if last is not None else len(enc.ids)):
            mask[i] = 1
    return mask


@pytest.mark.parametrize("style", list(TEMPLATES))
def test_identity_with_the_reference(tmp_path: Path, style: str) -> None:
    convs = conversations(N, seed=11, system=style != "mistral")
    stage = make(tmp_path / "tok", style, mask="loss_mask")
    out = stage.process(batch_of(convs))
    assert out.removed is None
    tok = reference_tokenizer(tmp_path / "tok")
    got_ids = out.batch.column("input_ids").to_pylist()
    got_mask = out.batch.column("loss_mask").to_pylist()
    bad_text = bad_ids = bad_mask = bad_decode = straddles = 0
    for convo, ids, mask in zip(convs, got_ids, got_mask, strict=True):
        text = hf_render(TEMPLATES[style], convo, SPECIALS)
        bad_text += stage.render(convo)[0] != text
        bad_ids += ids != tok.encode(text, add_special_tokens=False).ids
        if style == "chatml_generation":
            bad_mask += mask != hf_generation_mask(TEMPLATES[style], convo, tok)
        runs = np.split(np.asarray(ids), np.flatnonzero(np.diff(np.asarray(mask))) + 1)
        starts = np.concatenate([[0], np.flatnonzero(np.diff(np.asarray(mask))) + 1])
        decoded = [
            tok.decode(run.tolist(), skip_special_tokens=False)
            for run, at in zip(runs, starts, strict=True)
            if mask[at]
        ]
        contents = [m["content"] for m in convo if m["role"] == "assistant"]
        if style == "llama3":
            contents = [c.strip() for c in contents]
        wanted = [c + EOT[style] for c in contents]
        bad_decode += len(decoded) != len(wanted)
        for got, want in zip(decoded, wanted, strict=False):
            # A token may straddle the template's text and the content (byte-level BPE joins
            # "\n" + "  spaced" into one whitespace token): it is then learned with its
            # template part, as transformers' mask does. Nothing else may be added or lost.
            extra = got[: len(got) - len(want)]
            straddles += bool(extra)
            bad_decode += not (got.endswith(want) and extra.strip() == "" and len(extra) < 3)
    assert (bad_text, bad_ids, bad_mask, bad_decode) == (0, 0, 0, 0)
    print(f"{style}: {N} conversations, {straddles} assistant turns with a straddling token")
    assert sum(map(len, got_ids)) > 10_000


def test_labels_mask_everything_but_the_assistant(tmp_path: Path) -> None:
    stage = make(tmp_path / "tok", "chatml")
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    out = stage.process(batch_of([convo])).batch
    ids, labels = out.column("input_ids")[0].as_py(), out.column("labels")[0].as_py()
    assert out.column("num_tokens")[0].as_py() == len(ids) == len(labels)
    kept = [(i, lab) for i, lab in zip(ids, labels, strict=True) if lab != -100]
    assert all(i == lab for i, lab in kept)
    tok = reference_tokenizer(tmp_path / "tok")
    assert tok.decode([i for i, _ in kept], skip_special_tokens=False) == "yo<|im_end|>"
    assert out.schema == stage.output_schema(batch_of([convo]).schema)
    assert "messages" not in out.schema.names


def test_max_len_drops_or_truncates_and_template_errors_are_reasons(tmp_path: Path) -> None:
    long = [{"role": "user", "content": "word " * 200}, {"role": "assistant", "content": "ok"}]
    short = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b " * 50}]
    dropped = make(tmp_path / "a", "chatml", max_len=120).process(batch_of([long, short]))
    assert dropped.batch.column("id").to_pylist() == ["c1"]
    assert dropped.removed is not None
    assert dropped.removed.column("reason").to_pylist() == ["too_long"]
    cut = make(tmp_path / "b", "chatml", max_len=40, overlong="truncate").process(
        batch_of([long, short])
    )
    # the long one loses its only assistant tokens to truncation: removed, not kept unlearnable
    assert cut.batch.column("id").to_pylist() == ["c1"]
    assert cut.removed.column("reason").to_pylist() == ["no_assistant_tokens"]  # type: ignore[union-attr]
    assert cut.batch.column("num_tokens").to_pylist() == [40]
    assert cut.counters == {"truncated": 2}
    mistral = make(tmp_path / "c", "mistral")
    sys_first = [{"role": "system", "content": "s"}, *short]
    out = mistral.process(batch_of([sys_first, short]))
    assert out.removed.column("reason").to_pylist() == [  # type: ignore[union-attr]
        "template_error: Conversation roles must alternate user/assistant/user/assistant/..."
    ]


def test_counts_literal_special_tokens_in_content_and_pickles_small(tmp_path: Path) -> None:
    stage = make(tmp_path / "tok", "chatml")
    convo = [
        {"role": "user", "content": "what is <|im_end|>?"},
        {"role": "assistant", "content": "x"},
    ]
    assert stage.process(batch_of([convo])).counters == {"content_has_special_token_text": 1}
    assert len(pickle.dumps(stage)) < 2000
    info = stage.describe()["chat_template"]
    assert info["assistant_tokens"] == "prefix renderings"
    assert "chat_template_sha256" in stage.software()


def test_sandbox_refuses_python_internals(tmp_path: Path) -> None:
    evil = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    stage = make(tmp_path / "tok", "chatml", template=None)
    (tmp_path / "evil.jinja").write_text(evil)
    bad = ChatTemplate(
        ChatTemplateParams(source=str(tmp_path / "tok"), template=str(tmp_path / "evil.jinja")),
        StageContext(),
    )
    convo = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    out = bad.process(batch_of([convo]))
    assert out.batch.num_rows == 0
    assert out.removed.column("reason")[0].as_py().startswith("template_error:")  # type: ignore[union-attr]
    assert stage.process(batch_of([convo])).batch.num_rows == 1
