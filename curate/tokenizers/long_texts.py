"""Long documents encoded in pieces, cut only where the tokenizer cuts anyway.

`tokenizers` holds per-byte alignments and per-token strings for the text it encodes: a
54 MB document took 8 GB. The byte-level BPE families pre-tokenize with a regular
expression (GPT-2's, cl100k's, Llama 3's, tekken's) in which no pre-token holds a space
after a non-space character: spaces only ever begin a pre-token (` ?\\p{L}+`,
`[^\\r\\n\\p{L}\\p{N}]?\\p{L}+`) or make whitespace runs. So the position between a
non-space character and a single space followed by a letter is a pre-token boundary of the
whole text, and each side pre-tokenizes, then merges, exactly as it does inside the whole:
encoding the pieces and concatenating their ids gives the whole text's ids. This holds
only without a prefix space added per call, without added tokens that could match across
the cut, and with a pre-tokenizer and normalizer this argument was checked for
(`cuts_safely`):

- a lone ByteLevel pre-tokenizer with its own (GPT-2's) regex, no normalizer;
- Llama 3's and Qwen2's layout: a Split with exactly one of `SPLIT_PATTERNS`, then a
  ByteLevel step with no regex of its own. Neither pattern has a lookbehind or an anchor,
  so the matches from the cut on are those of the piece that starts there; no
  alternative matches a non-space character followed by a space, so the cut ends a match;
  the one lookahead, `\\s+(?!\\S)`, never reaches the end of the left piece, which ends
  in a non-space character. The same holds before a newline or CJK punctuation after an
  ASCII letter or digit or an ideograph (`MARKS`): only letter runs (and contractions,
  which end in a letter) hold a letter, only digit runs a digit. The same holds for
  tiktoken ranks split with either pattern (Llama 3's original tokenizer.model with
  `pattern:`): tiktoken encodes each match on its own, and has no normalizer;
- with that layout, no normalizer or NFC (Qwen2's). A space has combining class 0, no
  decomposition, and composes with nothing on either side, so NFC of the whole text is
  NFC of the pieces joined, and NFC turns no other character into a space (checked for
  every code point with the library's own normalizer, as for `MARKS`).

tests/tokenizers/test_long_texts.py compares pieces with whole texts on the sample
tokenizer and Mistral's tekken files; tests/tokenizers/test_split_layouts.py on tokenizers
trained in Llama 3's and Qwen2's layouts, cut at every point the rule allows.

SentencePiece BPE models trained with `split_by_whitespace` have no piece with "▁" (the
space) anywhere but first, so no merge crosses the "▁" a space becomes: the text before a
space and the text from it encode independently. Each call adds a dummy prefix "▁", so
the piece after a cut is given without its space, which the prefix puts back
(`spm_cuts_safely` checks the model: identity normalizer, dummy prefix, no whitespace
collapsing, BPE; tested on Mistral's v1, v2, v3 and v7 models).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np

PIECE_CHARS = 256 << 10  # a long text is cut at the first safe point after this many characters
BATCH_CHARS = 4 << 20  # characters handed to the library in one call, when pieces are cut

Encode = Callable[[list[str]], tuple[np.ndarray, np.ndarray]]


# With Llama 3's and Qwen2's patterns (`marks`), also before a newline or a CJK
# punctuation mark that follows an ASCII letter or digit or a CJK ideograph of Unicode 1.1:
# a letter or digit run's match ends there, and these classes are the same in every
# Unicode version Python or the regex engine may hold. Text without spaces (Chinese,
# Japanese) is cut so.
# a newline, the ideographic comma and full stop, the full-width ! , : ; ?
MARKS = "\n\u3001\u3002\uff01\uff0c\uff1a\uff1b\uff1f"
_MARK_CUT = re.compile(f"(?<=[0-9A-Za-z\u4e00-\u9fa5])[{MARKS}]")


def cut_points(text: str, size: int = PIECE_CHARS, marks: bool = False) -> list[int]:
    """Where to cut `text` into pieces of at least `size` characters: before a space that
    follows a non-space character and precedes a letter (and, with `marks`, before one of
    MARKS that follows a letter or digit of `_MARK_CUT`)."""
    cuts: list[int] = []
    n = len(text)
    at = size
    mark = -1  # the first mark cut at or after `at`, once searched; n when there is none
    while at < n:
        i = text.find(" ", at)
        while 0 < i < n - 1 and (text[i - 1].isspace() or not text[i + 1].isalpha()):
            i = text.find(" ", i + 1)
        i = i if 0 < i < n - 1 else n
        if marks:
            if mark < at:
                found = _MARK_CUT.search(text, at)
                mark = found.start() if found else n
            i = min(i, mark)
        if i >= n:
            break
        cuts.append(i)
        at = i + size
    return cuts


def encode_in_pieces(
    encode: Encode,
    texts: list[str],
    size: int = PIECE_CHARS,
    drop_space: bool = False,
    marks: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """`encode(texts)` with texts longer than `size` cut at `cut_points`, the pieces encoded
    in calls of about BATCH_CHARS characters, and the ids of each text's pieces joined.
    `drop_space`: the space at a cut is left out, for a tokenizer that puts it back in
    front of every call (SentencePiece's dummy prefix). `marks`: see `cut_points`."""
    if not any(len(t) > size for t in texts):
        return encode(texts)
    pieces: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        start = 0
        for cut in cut_points(text, size, marks) if len(text) > size else ():
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


# Llama 3's and Qwen2's Split patterns, as their tokenizer.json files write them; Qwen2
# splits digits one at a time. Any other pattern, however close, encodes whole.
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
SPLIT_PATTERNS = (LLAMA3_PATTERN, QWEN2_PATTERN)
SPLIT_NORMALIZERS = (None, {"type": "NFC"})  # with a Split layout: none, or Qwen2's NFC


def cuts_safely(tokenizer_json: str) -> bool:
    """Whether a tokenizer.json pre-tokenizes as one of the layouts the docstring argues
    for, with nothing that sees across a cut: no prefix space, and no added token (other
    than special ones, which curate never extracts from text) that holds whitespace or
    strips it."""
    data: dict[str, Any] = json.loads(tokenizer_json)
    pre = data.get("pre_tokenizer") or {}
    normalizer = data.get("normalizer")
    if pre.get("type") == "ByteLevel":
        if normalizer is not None or not _byte_level(pre, regex=True):
            return False
    elif not (_split_then_byte_level(pre) and normalizer in SPLIT_NORMALIZERS):
        return False
    for token in data.get("added_tokens") or ():
        if token.get("special"):
            continue
        content = str(token.get("content", ""))
        if token.get("lstrip") or token.get("rstrip") or any(c.isspace() for c in content):
            return False
        if pre.get("type") != "ByteLevel" and any(c in MARKS for c in content):
            return False  # a token could match across a cut before a mark
    return True


def cuts_at_marks(tokenizer_json: str) -> bool:
    """Whether a tokenizer.json that `cuts_safely` is in Llama 3's or Qwen2's layout, whose
    long texts may also be cut before MARKS."""
    pre = json.loads(tokenizer_json).get("pre_tokenizer") or {}
    return _split_then_byte_level(pre)


def _byte_level(step: dict[str, Any], regex: bool) -> bool:
    """A ByteLevel step adding no prefix space, with (GPT-2's) regex or without one."""
    return (
        step.get("type") == "ByteLevel"
        and step.get("add_prefix_space", True) is False
        and step.get("use_regex", True) is regex
    )


def _split_then_byte_level(pre: dict[str, Any]) -> bool:
    """Llama 3's and Qwen2's: Split by one of SPLIT_PATTERNS, matches kept as pre-tokens
    and the text between them too, then bytes mapped with no second regex."""
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not isinstance(steps, list) or len(steps) != 2:
        return False
    split, byte_level = steps
    return (
        isinstance(split, dict)
        and split.get("type") == "Split"
        and split.get("pattern") in [{"Regex": p} for p in SPLIT_PATTERNS]
        and split.get("behavior") == "Isolated"
        and split.get("invert") is False
        and isinstance(byte_level, dict)
        and _byte_level(byte_level, regex=False)
    )


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
