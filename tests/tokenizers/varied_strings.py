"""A few thousand varied strings that tokenizers get wrong in different ways, made from a seed."""

from __future__ import annotations

import random

SPECIAL_LITERALS = [
    "<s>", "</s>", "<unk>", "<pad>", "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>",
    "<|im_start|>", "<|im_end|>", "[INST]", "[/INST]", "<SPECIAL_12>", "[control_8]", "<mask>",
]  # fmt: skip

SCRIPTS = [
    "Привет, мир! Съешь же ещё этих мягких французских булок",
    "Καλημέρα κόσμε, ξεσκεπάζω την ψυχοφθόρα βδελυγμία",
    "مرحبا بالعالم، هذه جملة عربية",
    "שלום עולם, זה משפט בעברית",
    "नमस्ते दुनिया, यह हिन्दी वाक्य है",
    "你好，世界。这是一个中文句子。",
    "こんにちは世界、これは日本語の文です。カタカナ",
    "안녕하세요 세계, 한국어 문장입니다",
    "สวัสดีชาวโลก นี่คือประโยคภาษาไทย",
    "გამარჯობა მსოფლიო", "Բարեւ աշխարհ", "வணக்கம் உலகம்", "ሰላም ልዑል",
    "Ça va? Größe, façade, naïve, smørrebrød, żółć, Ångström",
    "e\u0301 a\u0308 n\u0303 (combining marks)", "ﬁ ﬂ ① ² Ⅻ ｆｕｌｌ",
    "∑∫√∞≠≈ ∀x∈ℝ: x²≥0", "┌─┐│└┘ ░▒▓█",
]  # fmt: skip

EMOJI = ["😀", "👩‍💻", "🇫🇷", "👍🏽", "👨‍👩‍👧‍👦", "🤖", "❤️", "🏳️‍🌈", "🧑🏿‍🚀", "🫠"]

CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "<div class=\"x\">&amp; &lt;tag&gt;</div>",
    "SELECT * FROM t WHERE id IN (1,2,3) ORDER BY name DESC;",
    "#!/bin/sh\nset -euo pipefail\necho \"$HOME\" | tr a-z A-Z\n",
    "fn main() { let v: Vec<u8> = vec![0xff; 16]; println!(\"{:?}\", v); }",
    "    \n\t\t  mixed indentation\n        deep\n",
]  # fmt: skip

WORDS = ['the', 'of', 'and', 'to', 'in', 'is', 'was', 'for', 'on', 'that', 'with', 'as', 'by', 'at', 'from', 'it', 'an', 'be', 'this', 'which', 'or', 'are', 'tokenizer', 'training', 'corpus', 'model', 'language', 'data', 'version', 'shard', 'manifest', '2048', '3.14159', "don't", "I'll", "we've", "they're", "it's", 'ABCDEF', 'CamelCaseWord', 'snake_case_word', 'kebab-case-word']  # fmt: skip

FIXED = [
    "", " ", "  ", "\t", "\n", "\r\n", "\n\n\n", "   leading", "trailing   ", " \t \n \r ",
    "a\u00a0b", "\u3000", "\u2581", "\u200b\u200d\ufeff", "\x01\x7f", "x", "1234567890" * 20,
    "a" * 5000, "pneumonoultramicroscopicsilicovolcanoconiosis" * 40,
    "https://example.com/very/long/path?with=query&and=more#fragment" * 10,
    "<s><s></s></s>", "text<s>text</s>text", "<|endoftext|><|endoftext|>", " <unk> ",
    "[INST] do this [/INST]", "\U0001F600" * 50, "\U00010348\U0001D11E\U000E0041",
]  # fmt: skip


def _whitespace(rng: random.Random) -> str:
    return "".join(rng.choice(" \t\n\r\u00a0") for _ in range(rng.randint(1, 12)))


def _random_codepoints(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(1, 20)):
        cp = rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x2FFF),
                         rng.randint(0x3000, 0xD7FF), rng.randint(0xE000, 0xFFFD),
                         rng.randint(0x10000, 0x10FFFF)])  # fmt: skip
        out.append(chr(cp))
    return "".join(out)


def varied_strings(n: int = 3000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    makers = [
        lambda: rng.choice(SPECIAL_LITERALS),
        lambda: rng.choice(SCRIPTS),
        lambda: "".join(rng.choices(EMOJI, k=rng.randint(1, 4))),
        lambda: rng.choice(CODE),
        lambda: " ".join(rng.choices(WORDS, k=rng.randint(1, 30))),
        lambda: _whitespace(rng),
        lambda: _random_codepoints(rng),
        lambda: rng.choice(WORDS) * rng.randint(20, 300),
        lambda: str(rng.randint(0, 10**30)),
    ]
    out = list(FIXED)
    while len(out) < n:
        parts = [rng.choice(makers)() for _ in range(rng.randint(1, 8))]
        seps = ["", " ", "\n", "\t", "  "]
        out.append("".join(p + rng.choice(seps) for p in parts))
    return out
