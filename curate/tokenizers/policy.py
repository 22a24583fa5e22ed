"""Which control ids go around every document, decided once and written in the manifest.

For pre-training the default is the model's EOS after every document, as the separator
between documents, whatever `add_eos_token` says in tokenizer_config.json (that flag is
about prompts: Llama and Mistral set it false); BOS as the model's configuration says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from curate.errors import CurateError
from curate.tokenizers.encoders import Encoder


@dataclass(frozen=True)
class Policy:
    bos_token: str | None
    bos_id: int | None  # None: no BOS added
    eos_token: str | None
    eos_id: int | None  # None: no EOS added
    why_bos: str
    why_eos: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "bos": {"added": self.bos_id is not None, "token": self.bos_token,
                    "id": self.bos_id, "why": self.why_bos},
            "eos": {"added": self.eos_id is not None, "token": self.eos_token,
                    "id": self.eos_id, "why": self.why_eos},
        }  # fmt: skip

    def apply(self, flat: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Insert BOS before and EOS after each document's ids, vectorised."""
        bos, eos = int(self.bos_id is not None), int(self.eos_id is not None)
        if not bos and not eos:
            return flat, lengths
        new_lengths = lengths + bos + eos
        ends = np.cumsum(new_lengths)
        starts = ends - new_lengths
        out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=flat.dtype)
        if bos:
            out[starts] = self.bos_id
        if eos:
            out[ends - 1] = self.eos_id
        old_starts = np.cumsum(lengths) - lengths
        shift = np.repeat(starts + bos - old_starts, lengths)
        out[np.arange(len(flat)) + shift] = flat
        return out, new_lengths


def _id(encoder: Encoder, token: str | None, what: str) -> int:
    if token is None:
        raise CurateError(
            f"tokenizer {encoder.source.main}: no {what} token is known; "
            f"name it with tokenize.{what}_token, or set tokenize.{what}: false"
        )
    found = encoder.token_id(token)
    if found is None:
        raise CurateError(
            f"tokenizer {encoder.source.main}: {what} token {token!r} is not a special token "
            f"of this tokenizer (special tokens: {', '.join(list(encoder.special)[:20])})"
        )
    return found


def resolve_policy(
    encoder: Encoder,
    bos: Literal["auto"] | bool,
    eos: bool,
    bos_token: str | None = None,
    eos_token: str | None = None,
) -> Policy:
    d = encoder.defaults
    if bos == "auto":
        add_bos, why_bos = d.add_bos, f"auto: {d.why}"
    else:
        add_bos, why_bos = bos, "recipe"
    bos_tok = bos_token or d.bos_token
    eos_tok = eos_token or d.eos_token
    why_eos = "recipe: EOS after every document (the separator)" if eos else "recipe: none"
    return Policy(
        bos_tok,
        _id(encoder, bos_tok, "bos") if add_bos else None,
        eos_tok,
        _id(encoder, eos_tok, "eos") if eos else None,
        why_bos,
        why_eos,
    )
