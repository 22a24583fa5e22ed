"""tokenizer.json files, encoded with the `tokenizers` library they were written for.

Truncation and padding settings in the file are for inference and are switched off,
so no training document is cut or padded. Special tokens are not extracted from the
text (`encode_special_tokens`): a document that contains the characters `<s>` gets the
ids of those characters, not the control id. No post-processor template is applied
(`add_special_tokens=False`); the BOS/EOS policy adds what it decides.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from curate.tokenizers.encoders import Encoder, ModelDefaults, config_defaults, flatten
from curate.tokenizers.long_texts import cuts_at_marks, cuts_safely, encode_in_pieces
from curate.tokenizers.source import TokenizerSource

_EOS_NAMES = ("</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "<|eos|>", "<|im_end|>")
_BOS_NAMES = ("<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>")


@dataclass
class HFJsonEncoder(Encoder):
    _tok: Any = None
    _cuts: bool = False  # long texts are encoded in pieces (curate.tokenizers.long_texts)
    _marks: bool = False  # ... cut before newlines and CJK punctuation too

    @classmethod
    def load(cls, source: TokenizerSource, threads: int) -> HFJsonEncoder:
        # tokenizers sizes its thread pool from this variable when first used.
        os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, threads)))
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(source.main))
        tok.no_truncation()
        tok.no_padding()
        tok.encode_special_tokens = True
        added = tok.get_added_tokens_decoder()
        special = {t.content: i for i, t in sorted(added.items()) if t.special}
        vocab = tok.get_vocab(with_added_tokens=True)
        enc = cls(
            source=source,
            threads=threads,
            library=f"tokenizers {tokenizers.__version__} encode_batch_fast",
            vocab_size=max(vocab.values()) + 1 if vocab else 0,
            special=special,
            _tok=tok,
            _cuts=cuts_safely(tok.to_str()),
            _marks=cuts_at_marks(tok.to_str()),
        )
        enc.defaults = config_defaults(source, enc._format_defaults())
        return enc

    def _format_defaults(self) -> ModelDefaults:
        """Without a tokenizer_config.json: what the file's post-processor would add."""
        ids = self._tok.post_process(self._tok.encode("", add_special_tokens=False)).ids
        by_id = {i: t for t, i in self.special.items()}
        bos = next((t for t in _BOS_NAMES if t in self.special), None)
        eos = next((t for t in _EOS_NAMES if t in self.special), None)
        if ids and ids[0] in by_id and by_id[ids[0]] != eos:
            return ModelDefaults(by_id[ids[0]], eos, True, "tokenizer.json post-processor")
        return ModelDefaults(bos, eos, False, "tokenizer.json post-processor adds no BOS")

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if self._cuts:
            return encode_in_pieces(self._encode, texts, marks=self._marks)
        return self._encode(texts)

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        encodings = self._tok.encode_batch_fast(texts, add_special_tokens=False)
        return flatten([e.ids for e in encodings])
