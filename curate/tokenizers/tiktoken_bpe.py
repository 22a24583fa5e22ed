"""Byte-level BPE from ranks: tiktoken ranks files (GPT style) and Mistral tekken JSON.

Both are encoded with `tiktoken`, built from the local file (tiktoken fetches only
`://` paths, and this module never hands it one). `encode_ordinary_batch` never
treats text as special tokens, so `<|endoftext|>` in a document is encoded as text.
Tekken ids are tiktoken ranks plus the number of reserved special tokens, exactly as
mistral-common's `Tekkenizer.encode` computes them.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from curate.errors import CurateError
from curate.tokenizers.encoders import Encoder, ModelDefaults, config_defaults, flatten
from curate.tokenizers.long_texts import SPLIT_PATTERNS, encode_in_pieces
from curate.tokenizers.source import TokenizerSource

# Tekken files of format version <= v7 carry no special token list; these are the ones
# mistral-common assumes for them (the rest of the reserved ranks are fillers).
# The pattern of Mistral's tekken files (240718, 240911): one of the byte-level families
# whose texts may be cut in pieces (curate.tokenizers.long_texts); another is not cut.
TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN_LEGACY_SPECIAL = {"<unk>": 0, "<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4}


@dataclass
class BPEEncoder(Encoder):
    """Built in two steps: what the manifest needs (cheap), then tiktoken's encoder, only
    where documents are encoded (`warm`), so the driver never builds it."""

    _build: Any = None  # () -> (tiktoken.Encoding, bytes per rank)
    _enc: Any = None
    offset: int = 0
    _rank_bytes: np.ndarray | None = None
    _cuts: bool = False  # long texts in pieces: tekken's, Llama 3's or Qwen2's pattern
    # (curate.tokenizers.long_texts)
    _marks: bool = False  # ... cut before newlines and CJK punctuation too: Llama 3's, Qwen2's

    def warm(self) -> None:
        if self._enc is None:
            self._enc, self._rank_bytes = self._build()

    def token_bytes(self) -> np.ndarray:
        """How many bytes each id stands for, from the ranks already in memory (0 for the
        special ids): what chat_template's token offsets are computed from."""
        self.warm()
        assert self._rank_bytes is not None
        out = np.zeros(self.vocab_size, np.int64)
        out[self.offset : self.offset + len(self._rank_bytes)] = self._rank_bytes
        return out

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if self._cuts:
            return encode_in_pieces(self._encode, texts, marks=self._marks)
        return self._encode(texts)

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        self.warm()
        if self.threads > 1:
            lists = self._enc.encode_ordinary_batch(texts, num_threads=self.threads)
        else:  # no thread pool for one thread
            lists = list(map(self._enc.encode_ordinary, texts))
        return flatten(lists, self.offset)


@dataclass
class TekkenEncoder(BPEEncoder):
    @classmethod
    def load(cls, source: TokenizerSource, threads: int, warm: bool = False) -> TekkenEncoder:
        """`warm`: also build the encoder now, from the same parse of the file (workers)."""
        import tiktoken

        data = json.loads(source.main.read_text(encoding="utf-8"))
        config = data["config"]
        num_special = int(config["default_num_special_tokens"])
        vocab_size = int(config["default_vocab_size"])
        if len(data["vocab"]) < vocab_size - num_special:
            raise CurateError(f"tekken file {source.main}: fewer ranks than its vocabulary size")
        listed = data.get("special_tokens")
        special = (
            {t["token_str"]: int(t["rank"]) for t in listed}
            if listed is not None
            else dict(_TEKKEN_LEGACY_SPECIAL)
        )
        inner = vocab_size - num_special
        cuts = data["config"].get("pattern") == TEKKEN_PATTERN
        enc, rank_bytes = _tekken_encoding(source, data, inner) if warm else (None, None)
        del data
        return cls(
            source=source,
            threads=threads,
            library=f"tiktoken {tiktoken.__version__} encode_ordinary_batch",
            vocab_size=vocab_size,
            special=special,
            defaults=config_defaults(
                source, ModelDefaults("<s>", "</s>", True, "tekken: Mistral models start with BOS")
            ),
            _build=lambda: _tekken_encoding(source, None, inner),
            _enc=enc,
            _rank_bytes=rank_bytes,
            offset=num_special,
            _cuts=cuts,
        )


def _tekken_encoding(source: TokenizerSource, data: Any, inner: int) -> tuple[Any, np.ndarray]:
    import tiktoken

    if data is None:
        data = json.loads(source.main.read_text(encoding="utf-8"))
    ranks = {base64.b64decode(t["token_bytes"]): int(t["rank"]) for t in data["vocab"][:inner]}
    if sorted(ranks.values()) != list(range(inner)):
        raise CurateError(f"tekken file {source.main}: ranks are not 0..{inner - 1}")
    pattern = data["config"]["pattern"]
    enc = tiktoken.Encoding(
        name=source.main.stem, pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
    )
    return enc, rank_bytes(ranks)


def rank_bytes(ranks: dict[bytes, int]) -> np.ndarray:
    """Each rank's length in bytes, indexed by rank."""
    out = np.zeros(max(ranks.values(), default=-1) + 1, np.int64)
    out[np.fromiter(ranks.values(), np.int64, len(ranks))] = np.fromiter(
        map(len, ranks), np.int64, len(ranks)
    )
    return out


def read_ranks(path: Any) -> dict[bytes, int]:
    """A tiktoken ranks file: one `base64-token rank` pair per line."""
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _preset(name: str) -> tuple[str, dict[str, int]] | None:
    """The split pattern and special tokens of a tiktoken preset (`cl100k_base`, ...),
    read from tiktoken's own definitions with its download step replaced by nothing."""
    try:
        import tiktoken_ext.openai_public as public
    except ImportError:
        return None
    make = public.ENCODING_CONSTRUCTORS.get(name)
    if make is None:
        return None
    real = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        spec = make()
    finally:
        public.load_tiktoken_bpe = real
    return str(spec["pat_str"]), dict(spec["special_tokens"])


@dataclass
class TiktokenEncoder(BPEEncoder):
    pattern: str = ""

    @classmethod
    def load(
        cls, source: TokenizerSource, threads: int, pattern: str | None, special: dict[str, int]
    ) -> TiktokenEncoder:
        import tiktoken

        preset = _preset(pattern or source.main.name.split(".")[0])
        if preset is not None:
            pat, preset_special = preset
            special = {**preset_special, **special}
        elif pattern:
            pat = pattern
        else:
            raise CurateError(
                f"tiktoken ranks file {source.main}: give its split pattern "
                "(tokenize.pattern: a regex, or a preset name such as cl100k_base)"
            )
        ranks = read_ranks(source.main)
        enc = tiktoken.Encoding(
            name=source.main.stem, pat_str=pat, mergeable_ranks=ranks, special_tokens=special
        )
        eos = next((t for t in ("<|endoftext|>", "</s>") if t in special), None)
        return cls(
            source=source,
            threads=threads,
            library=f"tiktoken {tiktoken.__version__} encode_ordinary_batch",
            vocab_size=max([*ranks.values(), *special.values()]) + 1,
            special=special,
            defaults=config_defaults(source, ModelDefaults(None, eos, False, "tiktoken: no BOS")),
            _enc=enc,
            _rank_bytes=rank_bytes(ranks),
            _cuts=pat in SPLIT_PATTERNS,  # Llama 3's (original/tokenizer.model) or Qwen2's
            _marks=pat in SPLIT_PATTERNS,
            pattern=pat,
        )
