"""Chat templates in the styles of common model families (each with a twin that marks the
assistant's part with `{% generation %}` and renders the same text), tokenizers that know
their special tokens, varied conversations, and `transformers`' own rendering."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from conftest import REPO

CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# ChatML with the {% generation %} tag, as SmolLM/Qwen-style templates with masks write it.
CHATML_GENERATION = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\n' }}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
# Meta Llama 3 instruct's template (header style, bos_token, content | trim).
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)
# Mistral 7B Instruct v0.1's template: [INST] turns, a system prompt refused, roles checked.
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}"
)
# The same two with the assistant's part in {% generation %} blocks: they render the same
# text, so transformers' assistant mask for them is the reference for the prefix method.
LLAMA3_GENERATION = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set header = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' %}"
    "{% if loop.index0 == 0 %}{% set header = bos_token + header %}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ header }}"
    "{% generation %}{{ message['content'] | trim + '<|eot_id|>' }}{% endgeneration %}"
    "{% else %}{{ header + message['content'] | trim + '<|eot_id|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)
MISTRAL_GENERATION = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] + eos_token }}{% endgeneration %}{{ ' ' }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}"
)
TEMPLATES = {"chatml": CHATML, "chatml_generation": CHATML_GENERATION, "llama3": LLAMA3,
             "mistral": MISTRAL}  # fmt: skip
GENERATION_TWIN = {"chatml": CHATML_GENERATION, "chatml_generation": CHATML_GENERATION,
                   "llama3": LLAMA3_GENERATION, "mistral": MISTRAL_GENERATION}  # fmt: skip
EOT = {"chatml": "<|im_end|>", "chatml_generation": "<|im_end|>", "llama3": "<|eot_id|>",
       "mistral": "</s>"}  # fmt: skip

CHAT_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
                 "<|end_header_id|>", "<|eot_id|>"]  # fmt: skip


def chat_tokenizer(folder: Path, template: str | None = None, **config: Any) -> Path:
    """sample_data's byte-level BPE with the chat families' special tokens added."""
    from tokenizers import AddedToken, Tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_file(str(REPO / "sample_data" / "tokenizer" / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CHAT_SPECIALS])
    tok.save(str(folder / "tokenizer.json"))
    cfg = json.loads((REPO / "sample_data" / "tokenizer" / "tokenizer_config.json").read_text())
    cfg.update(config)
    if template is not None:
        cfg["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return folder


WORDS = ["the", "model", "answer", "question", "data", "Größe", "naïve", "你好", "Привет",
         "😀", "👩‍💻", "x²", "λ", "tab\there", "  spaced  ", "é", "ﬁ", "<b>bold</b>"]  # fmt: skip
CODE = ["def f(x):\n    return x ** 2\n", "```python\nprint('hi')\n```",
        "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", '{"k": [1, null, true]}']  # fmt: skip
LITERALS = ["<|im_end|>", "<|im_start|>", "<|eot_id|>", "</s>", "<s>", "[INST]", "[/INST]",
            "<|start_header_id|>", "{{ bos_token }}", "{% raw %}"]  # fmt: skip


def _content(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 8)):
        roll = rng.random()
        if roll < 0.15:
            parts.append(rng.choice(CODE))
        elif roll < 0.25:
            parts.append(rng.choice(LITERALS))
        else:
            parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))))
    text = rng.choice([" ", "\n", "\n\n", ""]).join(parts)
    return text if text.strip() else "ok"


def conversations(n: int, seed: int = 9, system: bool = True) -> list[list[dict[str, str]]]:
    """Varied valid conversations: 1-4 exchanges, optional system prompt, unicode, code,
    literal special-token strings, leading and trailing whitespace."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        msgs = []
        if system and rng.random() < 0.4:
            msgs.append({"role": "system", "content": _content(rng)})
        for _ in range(rng.randint(1, 4)):
            msgs.append({"role": "user", "content": _content(rng)})
            msgs.append({"role": "assistant", "content": _content(rng)})
        out.append(msgs)
    return out


def hf_render(
    template: str, messages: list[dict[str, str]], specials: dict[str, Any],
    add_generation_prompt: bool = False,
) -> tuple[str, list[tuple[int, int]]]:  # fmt: skip
    """transformers' own rendering (`render_jinja_template`, what `apply_chat_template`
    calls) and its `{% generation %}` spans (empty without generation blocks)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    generation = "generation" in template
    rendered, spans = render_jinja_template(
        conversations=[messages], chat_template=template,
        return_assistant_tokens_mask=generation,
        add_generation_prompt=add_generation_prompt, **specials,
    )  # fmt: skip
    return rendered[0], [tuple(s) for s in spans[0]] if generation else []


def hf_marked_render(
    template: str, messages: list[dict[str, str]], specials: dict[str, Any], controls: list[str]
) -> list[str | tuple[str]]:
    """The rendering cut into text and the template's own control tokens (as 1-tuples):
    transformers' `sanitize_control_tokens` marking tells the template's control tokens
    from the same strings inside message contents, which stay text."""
    import re

    from transformers.utils.chat_template_utils import (
        _get_control_token_patterns,
        mark_control_tokens,
        render_jinja_template,
    )

    controls_re, markers_re = _get_control_token_patterns(tuple(controls))
    marked = mark_control_tokens(messages, controls_re)
    rendered = render_jinja_template(conversations=[marked], chat_template=template, **specials)
    pieces = markers_re.split(rendered[0][0])  # [text, content token or None, text, ...]
    out: list[str | tuple[str]] = []
    buf = ""
    for i, piece in enumerate(pieces):
        if i % 2:  # a control token inside a content (text), or a lone marker (nothing)
            buf += piece or ""
            continue
        for j, part in enumerate(re.split(f"({controls_re.pattern})", piece)):
            if j % 2:
                if buf:
                    out.append(buf)
                out.append((part,))
                buf = ""
            else:
                buf += part
    if buf:
        out.append(buf)
    return out


def mistral_data() -> Path:
    """mistral-common's tokenizer files, from the installed wheel (see .ci/run)."""
    import importlib.util

    import pytest

    spec = importlib.util.find_spec("mistral_common")
    if spec is None or spec.origin is None:
        pytest.skip("mistral-common is not installed (test dependency, see .ci/run)")
    return Path(spec.origin).parent / "data"


MISTRAL_SPECIALS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def mistral_tokenizer(folder: Path, name: str, template: str) -> Path:
    """A model folder holding one of mistral-common's tokenizers (Mistral 7B's SentencePiece
    tokenizer.model.v1, or tekken) with a tokenizer_config.json carrying the template."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    target = "tokenizer.model" if ".model" in name else "tekken.json"
    shutil.copyfile(mistral_data() / name, folder / target)
    config = {**MISTRAL_SPECIALS, "chat_template": template}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder
