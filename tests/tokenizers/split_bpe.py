"""Byte-level BPE tokenizer.json files in Llama 3's and Qwen2's layout, trained here.

Both split with a regular expression, then map bytes with a ByteLevel step that has no
regex of its own; Qwen2 also normalizes to NFC and splits digits one at a time (`\\p{N}`
where Llama 3 has `\\p{N}{1,3}`). The patterns are those of Meta-Llama-3's and Qwen2's
tokenizer.json files. Each is trained on a few thousand varied strings (every script,
combining marks, digits, whitespace runs, code), so that merges cross every kind of
character the tricky texts below hold.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from varied_strings import varied_strings

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")

LAYOUTS = {
    "llama3": {
        "pattern": LLAMA3_PATTERN,
        "nfc": False,
        "special": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>"],
        "added": [],
        "config": {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                   "add_bos_token": True},
    },
    "qwen2": {
        "pattern": QWEN2_PATTERN,
        "nfc": True,
        "special": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "added": ["<tool_call>", "</tool_call>"],  # Qwen2.5's: added, not special
        "config": {"bos_token": None, "eos_token": "<|endoftext|>", "add_bos_token": False},
    },
}  # fmt: skip


def train_split_bpe(layout: str, vocab_size: int = 1500) -> Any:
    """A `tokenizers.Tokenizer` in the layout's shape, trained deterministically."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    spec = LAYOUTS[layout]
    tok = Tokenizer(models.BPE())
    if spec["nfc"]:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(spec["pattern"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    rng = random.Random(1)
    texts = varied_strings(800, seed=1) + tricky_texts(200, seed=1)
    texts += [cjk_text(rng, 300) for _ in range(100)]
    tok.train_from_iterator(texts, trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in spec["special"]])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in spec["added"]])
    return tok


def split_bpe_folder(folder: Path, layout: str, template: str | None = None) -> Path:
    """tokenizer.json and tokenizer_config.json (with `template` as its chat template)."""
    folder.mkdir(parents=True, exist_ok=True)
    train_split_bpe(layout).save(str(folder / "tokenizer.json"))
    config = {k: v for k, v in LAYOUTS[layout]["config"].items() if v is not None}
    if template is not None:
        config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


# What the patterns and NFC treat specially, and what Python and the regex engine may see
# differently: contractions in any case, digit runs of every length (ASCII and not),
# punctuation runs before newlines, \r\n runs, whitespace Python calls a space and the
# regex does not (\x1c-\x1f) and the reverse candidates (\x85, \u00a0, \u2028, \u3000),
# combining marks after letters, spaces and punctuation, sequences NFC composes (e +
# acute, Hangul jamo, = + long solidus overlay) and singletons it replaces (the Angstrom
# and Ohm signs, U+0340), CJK, emoji with joiners, and letters with no space before them.
TRICKY = [
    "a", "Z", "é", "e\u0301", "A\u030a", "\u212b", "\u2126", "\u0340", "\u0301", "\u0308",
    "\u0338", "=\u0338", "\u1100\u1161", "\u1100", "\u1161", "\u11a8", "가", "ﬁ", "ß",
    "'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'D", "'", "’s", "don't", "I'LL",
    "1", "12", "123", "1234", "12345678", "٣٤٥", "²", "Ⅻ", "½",
    ".", ",", "!?", "...", "—", "«»", "()", "{", "}", "#", "@", "$", "_", "-", "<", ">",
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", ".\n", "!\r\n",
    "\x1c", "\x1f", "\x85", "\u00a0", "\u2028", "\u2029", "\u3000", "\u200b", "\u180e",
    "你好", "世界", "，", "。", "こんにちは", "カタカナ", "한국어", "Привет", "مرحبا",
    "😀", "👩‍💻", "🇫🇷", "\U0001f44d\U0001f3fd", "\ufeff", "\U00010348", "\x00", "\x7f",
    "word", "Word", "WORD", "tokenizer", "x²", "λ", "<|im_start|>", "<tool_call>",
]  # fmt: skip


def tricky_text(rng: random.Random, n: int) -> str:
    """`n` pieces of TRICKY, each often followed by a space and a word (a cut point)."""
    parts = []
    for _ in range(n):
        parts.append(rng.choice(TRICKY))
        if rng.random() < 0.3:
            parts.append(" " + rng.choice(["a", "word", "é", "你好", "Привет", "e\u0301"]))
    return "".join(parts)


def tricky_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [tricky_text(rng, rng.randint(1, 400)) for _ in range(n)]


# Beside the marks a cut may precede: ideographs of Unicode 1.1 and later ones (U+9FA6 on,
# extension A), kana, other CJK punctuation, and what may follow a mark.
CJK_PARTS = [
    "\n", "\u3001", "\u3002", "\uff01", "\uff0c", "\uff1a", "\uff1b", "\uff1f", "\u300c",
    "\u300d", "\u2026", "\uff08", "\uff09", "\u9fa6", "\u9fef", "\u3400", "\u3005", "\u30fc",
    "\u3041", "\u30a2", "\u0301", "\u3099", "\u309a", "1", "23", "x", "Ab", " ", "\n\n", ".",
    "'s",
]  # fmt: skip


IDEOGRAPHS = "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去"


def cjk_text(rng: random.Random, n: int) -> str:
    """Mostly ideographs, with the parts above between them."""
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.5:  # a few common ones, so that merges join them
            out.append("".join(rng.choices(IDEOGRAPHS, k=rng.randint(1, 4))))
        elif roll < 0.6:
            out.append(chr(rng.randint(0x4E00, 0x9FA5)))
        else:
            out.append(rng.choice(CJK_PARTS))
    return "".join(out)
