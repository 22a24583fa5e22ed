"""Which tokens of a rendered conversation are the assistant's: the ones the loss is on.

Two ways to find the assistant's characters, then one way to map them to tokens:

- `{% generation %}` blocks, when the template has them: the spans `transformers`
  returns as its assistant mask;
- otherwise, by rendering prefixes: assistant turn i spans from the end of the
  conversation up to i rendered with `add_generation_prompt=True` to the end of the
  conversation up to and including i. Both must be prefixes of the full rendering (true
  of ChatML, Llama-3 and [INST] templates); a template for which they are not is
  reported, never guessed. Whitespace after a closing special token (ChatML's newline
  after `<|im_end|>`) is left out: the loss is on the content and the end-of-turn token.

Characters become tokens as `transformers` maps them (`char_to_token` of a span's first
and last character, everything in between included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Span = tuple[int, int]
RenderFn = Callable[[list[dict[str, str]], bool], str]


class NotPrefixStable(Exception):
    """A template renders a conversation's beginning differently from the whole of it."""


def prefix_spans(
    messages: list[dict[str, str]], full: str, render: RenderFn, specials: Sequence[str]
) -> list[Span]:
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(messages[:i], True)
        upto = render(messages[: i + 1], False)
        if not (full.startswith(before) and full.startswith(upto) and len(upto) > len(before)):
            raise NotPrefixStable(f"assistant message {i}")
        start, end = len(before), len(upto)
        tail = full[start:end]
        stripped = tail.rstrip()
        if len(stripped) < len(tail) and any(stripped.endswith(t) for t in specials if t):
            end = start + len(stripped)
        spans.append((start, end))
    return spans


def token_mask(offsets: np.ndarray, spans: Sequence[Span], n_tokens: int) -> np.ndarray:
    """A 0/1 mask over tokens from character spans; offsets: (n_tokens, 2) character ranges."""
    mask = np.zeros(n_tokens, dtype=np.uint8)
    if not n_tokens or not spans:
        return mask
    starts, ends = offsets[:, 0], offsets[:, 1]
    for start, end in spans:
        first = _char_to_token(starts, ends, start)
        if first is None or end <= start:
            continue
        last = _char_to_token(starts, ends, end - 1)
        mask[first : (last + 1 if last is not None else n_tokens)] = 1
    return mask


def _char_to_token(starts: np.ndarray, ends: np.ndarray, char: int) -> int | None:
    """The first token whose character range holds `char` (as tokenizers' char_to_token)."""
    hits = np.flatnonzero((starts <= char) & (ends > char))
    return int(hits[0]) if len(hits) else None
