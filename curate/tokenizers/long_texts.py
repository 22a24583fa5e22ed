"""Long documents encoded in pieces, cut only where the tokenizer cuts anyway.

`tokenizers` holds per-byte alignments and per-token strings for the text it encodes: a
54 MB document took 8 GB. The byte-level BPE families pre-tokenize with a regular
expression (GPT-2's, cl100k's, Llama 3's, tekken's) in which no pre-token holds a space
after a non-space character: spaces only ever begin a pre-token (` ?\\p{L}+`,
`[^\\r\\n\\p{L}\\p{N}]?\\p{L}+`) or make whitespace runs. So the position between a
non-space character and a single space followed by a letter is a pre-token boundary of the
whole text, and each side pre-tokenizes, then merges, exactly as it does inside the whole:
encoding the pieces and concatenating their ids gives the whole text's ids. This holds
only without a normalizer, without a prefix space added per call, and without added
tokens that could match across the cut (`cuts_safely` checks a tokenizer.json for all
three); tests/tokenizers/test_long_texts.py compares pieces with whole texts on the
sample tokenizer and Mistral's tekken files.

SentencePiece BPE models trained with `split_by_whitespace` have no piece with "▁" (the
space) anywhere but first, so no merge crosses the "▁" a space becomes: the text before a
space and the text from it encode independently. Each call adds a dummy prefix "▁", so
the piece after a cut is given without its space, which the prefix puts back
(`spm_cuts_safely` checks the model: identity normalizer, dummy prefix, no whitespace
collapsing, BPE; tested on Mistral's v1, v2, v3 and v7 models).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

PIECE_CHARS = 256 << 10  # a long text is cut at the first safe point after this many characters
BATCH_CHARS = 4 << 20  # characters handed to the library in one call, when pieces are cut

Encode = Callable[[list[str]], tuple[np.ndarray, np.ndarray]]


def cut_points(text: str, size: int = PIECE_CHARS) -> list[int]:
    """Where to cut `text` into pieces of at least `size` characters: before a space that
    follows a non-space character and precedes a letter."""
    cuts: list[int] = []
    n = len(text)
    i = text.find(" ", size)
    while 0 < i < n - 1:
        if not text[i - 1].isspace() and text[i + 1].isalpha():
            cuts.append(i)
            i = text.find(" ", i + size)
        else:
            i = text.find(" ", i + 1)
    return cuts


def encode_in_pieces(
    encode: Encode, texts: list[str], size: int = PIECE_CHARS, drop_space: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """`encode(texts)` with texts longer than `size` cut at `cut_points`, the pieces encoded
    in calls of about BATCH_CHARS characters, and the ids of each text's pieces joined.
    `drop_space`: the space at a cut is left out, for a tokenizer that puts it back in
    front of every call (SentencePiece's dummy prefix)."""
    if not any(len(t) > size for t in texts):
        return encode(texts)
    pieces: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        start = 0
        for cut in cut_points(text, size) if len(text) > size else ():
            pieces.append(text[start:cut])
            owner.append(i)
            start = cut + 1 if drop_space else cut
        pieces.append(text[start:] if start else text)
        owner.append(i)
    flats: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    first = chars = 0
    for j, piece in enumerate(pieces):
        chars += len(piece)
        if chars >= BATCH_CHARS or j == len(pieces) - 1:
            flat, lengths = encode(pieces[first : j + 1])
            flats.append(flat)
            counts.append(lengths)
            first, chars = j + 1, 0
    per_piece = np.concatenate(counts)
    lengths = np.zeros(len(texts), np.int64)
    np.add.at(lengths, np.asarray(owner), per_piece)
    return np.concatenate(flats), lengths


def cuts_safely(tokenizer_json: str) -> bool:
    """Whether a tokenizer.json pre-tokenizes as the byte-level BPE families do, with
    nothing that sees across a cut: no normalizer, a ByteLevel pre-tokenizer with its own
    regex and no prefix space, and no added token (other than special ones, which curate
    never extracts from text) that holds whitespace or strips it."""
    data: dict[str, Any] = json.loads(tokenizer_json)
    pre = data.get("pre_tokenizer") or {}
    if data.get("normalizer") is not None or pre.get("type") != "ByteLevel":
        return False
    if pre.get("add_prefix_space", True) or not pre.get("use_regex", True):
        return False
    for token in data.get("added_tokens") or ():
        if token.get("special"):
            continue
        content = str(token.get("content", ""))
        if token.get("lstrip") or token.get("rstrip") or any(c.isspace() for c in content):
            return False
    return True


def spm_cuts_safely(model: bytes) -> bool:
    """Whether a SentencePiece model encodes "a b" as "a" then "b" with its dummy prefix:
    BPE split by whitespace, "▁" for spaces and in front of every call, no normalization
    or whitespace collapsing, and no user-defined symbol holding a space."""
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:  # needs protobuf
        return False
    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    proto.ParseFromString(model)
    norm, trainer = proto.normalizer_spec, proto.trainer_spec
    user_defined = 4  # ModelProto.SentencePiece.USER_DEFINED
    return (
        norm.name == "identity"
        and not norm.precompiled_charsmap
        and norm.add_dummy_prefix
        and norm.escape_whitespaces
        and not norm.remove_extra_whitespaces
        and trainer.model_type == trainer.BPE
        and trainer.split_by_whitespace
        and not trainer.treat_whitespace_as_suffix
        and not any(p.type == user_defined and ("\u2581" in p.piece or " " in p.piece)
                    for p in proto.pieces)
    )  # fmt: skip
