"""One global stream of samples that every rank reads by striding, and one position in it.

A resume must not depend on how many ranks or DataLoader workers read the data: the
stream is the concatenation of per-epoch orders of the samples (a permutation seeded by
`(seed, epoch)`; a mixture's interleaved index is just another order), and the position
is the number of samples all ranks together have taken from it. Rank r of w, reading
from position P, takes stream samples P + r, P + r + w, P + r + 2w, ...; so when every
rank has consumed k samples the position is P + k·w, whatever w is, and the next run
(any w) continues at exactly the next unread sample.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import numpy as np

from curate.errors import CurateError


class SampleOrder(Protocol):
    """The samples of one epoch, in the order they are read (indices into the reader's
    samples: blocks or rows). A mixture's interleaved index is one such order."""

    samples_per_epoch: int

    def epoch_order(self, epoch: int) -> np.ndarray: ...


class Permutation:
    """Every sample once per epoch, in a permutation seeded by (seed, epoch)."""

    def __init__(self, samples_per_epoch: int, seed: int, shuffle: bool = True) -> None:
        self.samples_per_epoch, self.seed, self.shuffle = samples_per_epoch, seed, shuffle

    def epoch_order(self, epoch: int) -> np.ndarray:
        return _permutation(self.samples_per_epoch, self.seed, epoch, self.shuffle)


@lru_cache(maxsize=2)  # this epoch and the next: 8 bytes a sample each
def _permutation(n: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    if not shuffle:
        return np.arange(n)
    return np.random.default_rng([seed, epoch]).permutation(n)


class Stream:
    """Sample g of the global stream, from epoch `first_epoch` on, `epochs` epochs long
    (None: endless)."""

    def __init__(self, order: SampleOrder, first_epoch: int, epochs: int | None) -> None:
        if epochs is not None and epochs < 1:
            raise CurateError(f"epochs={epochs}: give at least 1, or None for an endless stream")
        self.order, self.first_epoch, self.epochs = order, first_epoch, epochs

    @property
    def length(self) -> int | None:
        """Samples in the whole stream (None when endless)."""
        if self.epochs is None:
            return None
        return self.order.samples_per_epoch * self.epochs

    def sample(self, g: int) -> int:
        """Which sample of the reader is stream sample g."""
        n = self.order.samples_per_epoch
        if n == 0:
            raise IndexError(g)
        epoch, i = divmod(g, n)
        return int(self.order.epoch_order(self.first_epoch + epoch)[i])

    def per_rank(self, position: int, world_size: int) -> int | None:
        """Samples each rank reads from `position` on: the same number on every rank, so
        fewer than `world_size` samples at the very end of a finite stream are left out."""
        if self.length is None:
            return None
        return (self.length - position) // world_size

    def check(self, position: int) -> None:
        if position < 0 or (self.length is not None and position > self.length):
            raise CurateError(
                f"position {position} is outside the stream of {self.length} samples "
                f"({self.order.samples_per_epoch} per epoch x {self.epochs} epochs)"
            )
