"""Chat templates in the styles of common model families, a tokenizer that knows their
special tokens, varied conversations, and the reference: `transformers`' own rendering
(its `_compile_jinja_template` environment and `apply_chat_template` call, restated here
because transformers is not installed) and tokenization (`tokenizers`, special tokens
parsed, none added)."""

from __future__ import annotations

import json
import random
from datetime import datetime
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
TEMPLATES = {"chatml": CHATML, "chatml_generation": CHATML_GENERATION, "llama3": LLAMA3,
             "mistral": MISTRAL}  # fmt: skip
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


def hf_render(template: str, messages: list[dict[str, str]], specials: dict[str, Any],
              add_generation_prompt: bool = False) -> str:  # fmt: skip
    """transformers' _compile_jinja_template + render_jinja_template, without the tracker."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:  # fmt: skip
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)  # fmt: skip

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = datetime(2026, 1, 1).strftime
    if "generation" in template:  # HF's tracker tag renders its body unchanged
        template = template.replace("{%- generation %}", "").replace("{%- endgeneration %}", "")
    return env.from_string(template).render(
        messages=messages, tools=None, documents=None,
        add_generation_prompt=add_generation_prompt, **specials,
    )  # fmt: skip
