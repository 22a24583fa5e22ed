"""SentencePiece models (Llama / Mistral style), encoded by `sentencepiece` itself.

The reference library is also the fastest exact encoder here: its batch call runs on
several threads and returns numpy arrays, and it needs no conversion step (converting
to a `tokenizers` object is exact only with one converter setting; see FIELD-NOTES).
Control symbols (`<s>`, `</s>`) in text are encoded as text by sentencepiece.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from curate.tokenizers.encoders import Encoder, ModelDefaults, config_defaults
from curate.tokenizers.long_texts import encode_in_pieces, spm_cuts_safely


@dataclass
class SentencePieceEncoder(Encoder):
    _sp: Any = None
    _cuts: bool = False  # long texts in pieces (curate.tokenizers.long_texts)

    @classmethod
    def load(cls, source: Any, threads: int) -> SentencePieceEncoder:
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(source.main))
        n = sp.get_piece_size()
        special = {
            sp.id_to_piece(i): i
            for i in range(n)
            if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)
        }
        bos = sp.id_to_piece(sp.bos_id()) if sp.bos_id() >= 0 else None
        eos = sp.id_to_piece(sp.eos_id()) if sp.eos_id() >= 0 else None
        fallback = ModelDefaults(
            bos, eos, bos is not None, "SentencePiece model defines a BOS (Llama/Mistral add it)"
        )
        enc = cls(
            source=source,
            threads=threads,
            library=f"sentencepiece {spm.__version__} encode(numpy)",
            vocab_size=n,
            special=special,
            _sp=sp,
            _cuts=spm_cuts_safely(source.main.read_bytes()),
        )
        enc.defaults = config_defaults(source, fallback)
        return enc

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if self._cuts:
            return encode_in_pieces(self._encode, texts, drop_space=True)
        return self._encode(texts)

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if not texts:
            return np.empty(0, np.uint32), np.empty(0, np.int64)
        arrays = self._sp.encode(
            texts,
            out_type="numpy",
            add_bos=False,
            add_eos=False,
            enable_sampling=False,
            num_threads=self.threads,
        )
        lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
        flat = np.concatenate(arrays).astype(np.uint32, copy=False)
        return flat, lengths
