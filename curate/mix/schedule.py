"""How many samples each source gives, which ones, and in what order they interleave.

Counts: source k's target is `budget * weight_k / sum(weights)` tokens. Its samples are drawn
in a seeded order (one permutation of its rows per epoch, seeded by (seed, k, epoch),
concatenated), and it gives the number of them whose tokens come nearest the target, so the
tokens it achieves are its target to within one sample. A target that needs more than
`max_epochs` passes over the source is refused before anything is written.

Order: the samples interleave by earliest deadline first (Tijdeman's chairman assignment):
with n_k samples of source k among N, its j-th sample may go at slot t only once
(j - 1) * N < t * n_k, and must go by slot ceil(j * N / n_k). Every prefix of t samples then
holds t * n_k / N of source k to within one sample (strictly less than one), for any number
of sources and any weights; a smooth weighted round-robin does not guarantee that past two
sources. `check_prefixes` proves it on the order made, before it is published.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from curate.errors import CurateError
from curate.mixture_checks import prefix_deviation


@dataclass(frozen=True)
class Draw:
    """What one source gives the mixture."""

    rows: np.ndarray  # row numbers of the source's samples, in the order drawn (int64)
    tokens: int  # tokens those samples hold
    target: float  # tokens asked of it
    epochs: float  # samples given / samples the source holds
    eligible: int  # rows it holds that may be drawn


def epoch_order(n_rows: int, seed: int, source: int, epochs: int) -> np.ndarray:
    """The source's rows, one seeded permutation per epoch, concatenated."""
    return np.concatenate(
        [np.random.default_rng([seed, source, e]).permutation(n_rows) for e in range(epochs)]
    ).astype(np.int64)


def draw(
    row_tokens: np.ndarray, target: float, max_epochs: float, seed: int, source: int, label: str
) -> Draw:
    """The samples source `source` gives for `target` tokens (`row_tokens`: tokens of each of
    its eligible rows, by row number; rows not eligible have -1)."""
    eligible = np.flatnonzero(row_tokens >= 0)
    total = int(row_tokens[eligible].sum())
    if total == 0:
        raise CurateError(f"source {label} holds no tokens to draw from")
    if target > max_epochs * total:
        raise CurateError(
            f"source {label}: the budget asks {target:,.0f} tokens of it, "
            f"{target / total:.2f} epochs of its {total:,} tokens, but max_epochs is "
            f"{max_epochs:g}: lower the budget or its weight, or raise its max_epochs"
        )
    epochs = int(np.ceil(target / total)) + 1  # one more: the nearest count may be past it
    cap = int(np.floor(max_epochs * len(eligible)))
    order = eligible[epoch_order(len(eligible), seed, source, epochs)][:cap]
    cum = np.concatenate([[0], np.cumsum(row_tokens[order], dtype=np.int64)])
    n = int(np.searchsorted(cum, target, side="left"))  # first count reaching the target
    if n >= len(cum) or (n > 0 and target - cum[n - 1] <= cum[n] - target):
        n -= 1  # the count before it comes nearer (or the cap allows no more)
    n = max(n, 1)
    return Draw(order[:n], int(cum[n]), float(target), n / len(eligible), len(eligible))


def interleave(counts: list[int]) -> np.ndarray:
    """The source of each slot of the mixture (see the module's docstring), uint16."""
    total = sum(counts)
    out = np.empty(total, dtype=np.uint16)
    done = [0] * len(counts)
    ready: list[tuple[int, int]] = []  # (deadline, source) of each source's next sample
    waiting: list[tuple[int, int]] = []  # (release slot, source)
    for k, n in enumerate(counts):
        if n > 0:
            heapq.heappush(ready, (-(-total // n), k))  # sample 1: released at slot 1
    for slot in range(1, total + 1):
        while waiting and waiting[0][0] <= slot:
            _, k = heapq.heappop(waiting)
            heapq.heappush(ready, (-(-(done[k] + 1) * total // counts[k]), k))
        deadline, k = heapq.heappop(ready)
        if deadline < slot:
            raise CurateError(f"internal error: interleaving missed a deadline at slot {slot}")
        out[slot - 1] = k
        done[k] += 1
        if done[k] < counts[k]:
            release = done[k] * total // counts[k] + 1
            if release <= slot + 1:
                deadline = -(-(done[k] + 1) * total // counts[k])
                heapq.heappush(ready, (deadline, k))
            else:
                heapq.heappush(waiting, (release, k))
    return out


def check_prefixes(sources: np.ndarray, counts: list[int]) -> float:
    worst = prefix_deviation(sources, counts)
    if worst > 1.0 + 1e-9:
        raise CurateError(f"internal error: a prefix of the mixture is {worst:.3f} samples off")
    return worst
