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

Characters become tokens as `transformers` maps them: every token that overlaps a span
(`curate.chat.tokens`: decided per piece where a piece lies wholly inside or outside the
spans, token by token where a span begins or ends inside it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from curate.chat.tokens import CLOSE, OPEN

_MARKER = re.compile(f"[{OPEN}{CLOSE}]")

Span = tuple[int, int]
RenderFn = Callable[[list[dict[str, str]], bool], str]


class NotPrefixStable(Exception):
    """A template renders a conversation's beginning differently from the whole of it."""

    def __init__(self, message_index: int) -> None:
        super().__init__(f"assistant message {message_index}")
        self.message_index = message_index


def prefix_spans(
    messages: list[dict[str, str]], full: str, render: RenderFn, specials: Sequence[str]
) -> list[Span]:
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        # one rendering held at a time, and no copy of the turn: a long conversation's
        # renderings are each as long as it
        before = render(messages[:i], True)
        start, stable = len(before), full.startswith(before)
        del before
        upto = render(messages[: i + 1], False)
        if not (stable and full.startswith(upto) and len(upto) > start):
            raise NotPrefixStable(i)
        end = len(upto)
        del upto
        kept = _stripped_end(full, start, end)
        if kept < end and any(full.endswith(t, start, kept) for t in specials if t):
            end = kept
        spans.append((start, end))
    return spans


def _stripped_end(text: str, start: int, end: int) -> int:
    """Where `text[start:end].rstrip()` ends, without copying the whole of it."""
    at = end
    while at > start:
        low = max(start, at - 256)
        kept = len(text[low:at].rstrip())
        if kept:
            return low + kept
        at = low
    return start


def unmarked_spans(text: str, spans: Sequence[Span]) -> list[Span]:
    """Spans in a text rendered from marked contents (`curate.chat.tokens`), moved to the
    same text without its markers."""
    if not spans:
        return list(spans)
    marks = np.array([m.start() for m in _MARKER.finditer(text)], dtype=np.int64)
    flat = np.asarray(spans, dtype=np.int64).reshape(-1)
    moved = flat - np.searchsorted(marks, flat, side="left")
    return [(int(a), int(b)) for a, b in moved.reshape(-1, 2)]
