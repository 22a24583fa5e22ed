"""The encoder contract, and which library encodes each tokenizer family.

Every encoder turns a list of texts into one flat array of ids and one array of
lengths, with no special tokens added (the BOS/EOS policy adds them afterwards) and
with special-token strings in the text encoded as text. The library is chosen per
family by measurement (benchmarks/tokenize.py) among those whose ids are identical to
the family's reference library (tests/tokenizers/):

- tokenizer.json -> `tokenizers` (`encode_batch_fast`, truncation and padding off);
- SentencePiece -> `sentencepiece` itself: its batch call is as fast as `tokenizers`
  on a converted model, and exact by construction (no converter to trust);
- tekken and tiktoken ranks -> `tiktoken` (about 7x faster than `tokenizers` on the
  same byte-level BPE, with identical ids).
"""

from __future__ import annotations

import array
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import numpy as np

from curate.tokenizers.source import TokenizerSource


@dataclass
class ModelDefaults:
    """What the model itself says about BOS and EOS (tokenizer_config.json or the format)."""

    bos_token: str | None = None
    eos_token: str | None = None
    add_bos: bool = False
    why: str = ""


@dataclass
class Encoder(ABC):
    """A loaded tokenizer that encodes batches of texts exactly as its reference library."""

    source: TokenizerSource
    threads: int = 1
    library: str = ""
    vocab_size: int = 0
    special: dict[str, int] = field(default_factory=dict)  # special/control token -> id
    defaults: ModelDefaults = field(default_factory=ModelDefaults)

    @abstractmethod
    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(ids as one flat uint32 array, number of ids per text as int64)."""

    def warm(self) -> None:
        """Build whatever encoding needs beyond what describing the tokenizer needs."""
        return None

    def token_id(self, token: str) -> int | None:
        return self.special.get(token)

    def versions(self) -> dict[str, str]:
        return library_versions(self.source)


def library_versions(source: TokenizerSource) -> dict[str, str]:
    """Versions of the libraries whose output the ids depend on (metadata only, no import)."""
    libs = {
        "tokenizer.json": ("tokenizers",),
        "sentencepiece": ("sentencepiece",),
        "tekken": ("tiktoken",),
        "tiktoken": ("tiktoken",),
    }[source.kind]
    found = {}
    for lib in libs:
        try:
            found[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            found[lib] = "not installed"
    return found


def flatten(lists: list[list[int]], offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Python lists of ids (what the libraries return) as one uint32 array, with no per-id
    Python loop: `array.extend` converts each list in C."""
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    buf = array.array("I")
    for ids in lists:
        buf.extend(ids)
    flat = np.frombuffer(buf, dtype=np.uint32) if len(buf) else np.empty(0, np.uint32)
    if offset:
        flat = flat + np.uint32(offset)
    return flat, lengths


def load_encoder(
    source: TokenizerSource,
    *,
    threads: int = 1,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
    warm: bool = False,
) -> Encoder:
    """The fastest exact encoder for the source's family (`warm`: ready to encode now)."""
    kind = source.kind
    if kind == "tokenizer.json":
        from curate.tokenizers.hf_json import HFJsonEncoder

        return HFJsonEncoder.load(source, threads)
    if kind == "sentencepiece":
        from curate.tokenizers.spm import SentencePieceEncoder

        return SentencePieceEncoder.load(source, threads)
    from curate.tokenizers.tiktoken_bpe import TekkenEncoder, TiktokenEncoder

    if kind == "tekken":
        return TekkenEncoder.load(source, threads, warm)
    return TiktokenEncoder.load(source, threads, pattern, special_tokens or {})


def read_config(source: TokenizerSource) -> dict[str, Any]:
    import json

    if source.config is None:
        return {}
    data = json.loads(source.config.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def token_content(value: Any) -> str | None:
    """A token named in tokenizer_config.json: a string or an AddedToken-like mapping."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def config_defaults(source: TokenizerSource, fallback: ModelDefaults) -> ModelDefaults:
    """tokenizer_config.json's bos/eos tokens and add_bos_token, over the format's own."""
    cfg = read_config(source)
    if not cfg:
        return fallback
    out = ModelDefaults(fallback.bos_token, fallback.eos_token, fallback.add_bos, fallback.why)
    bos, eos = token_content(cfg.get("bos_token")), token_content(cfg.get("eos_token"))
    out.bos_token = bos or out.bos_token
    out.eos_token = eos or out.eos_token
    if isinstance(cfg.get("add_bos_token"), bool):
        out.add_bos = cfg["add_bos_token"]
        out.why = "tokenizer_config.json add_bos_token"
    return out
