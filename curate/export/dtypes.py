"""The type token ids take in an exported file, chosen from the largest id the tokenizer can
produce, never from a "vocab_size" that leaves out added tokens.

Megatron's indexed dataset has no uint32: its readers know uint8/16, int8/16/32/64 and
floats, so ids below 65,536 are uint16 and the rest int32 (whose ids must stay below
2^31). A type that cannot hold every id is refused before anything is written.
"""

from __future__ import annotations

import numpy as np

from curate.errors import CurateError

UINT16_IDS = 1 << 16
INT32_IDS = 1 << 31


def megatron_dtype(max_id: int, asked: str, what: str) -> np.dtype:
    """uint16 when every id is below 65,536, else int32; `asked` (uint16 or int32) is checked
    against `max_id` instead of chosen. `what` names the version in a refusal."""
    if max_id >= INT32_IDS:
        raise CurateError(
            f"{what}: its tokenizer produces ids up to {max_id:,}, above what Megatron's int32 "
            "holds (2,147,483,647); it cannot be exported to megatron"
        )
    chosen = np.dtype(np.uint16 if max_id < UINT16_IDS else np.int32)
    if asked == "auto":
        return chosen
    wanted = np.dtype(asked)
    if wanted == np.uint16 and max_id >= UINT16_IDS:
        raise CurateError(
            f"{what}: its tokenizer produces ids up to {max_id:,} (added and special tokens "
            f"included), which uint16 cannot hold (below 65,536); use --dtype int32 or auto"
        )
    return wanted


def check_ids(values: np.ndarray, max_id: int, what: str) -> None:
    """Every id of a chunk is one the tokenizer can produce (so it fits the chosen type)."""
    if len(values) and int(values.max()) > max_id:
        raise CurateError(
            f"{what}: holds id {int(values.max()):,}, above the largest its tokenizer can "
            f"produce ({max_id:,}); the version does not match its manifest, run curate verify"
        )
