"""Fixed-length token blocks in a seeded, rank-sharded, resumable order.

The order is a permutation seeded by (seed, epoch); rank r of w takes every w-th block of
it, and every rank gets the same number. A position is the index of the next block for
this rank, so resuming at sample k reads nothing before it. `Rows` reuses this order for
whole rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import Any

import numpy as np

from curate.errors import CurateError
from curate.loader.torch_dataset import torch_class


class TokenBlocks:
    """An iterable of fixed-length token blocks with a deterministic, resumable order."""

    def __init__(
        self,
        views: list[np.ndarray],
        starts: np.ndarray,
        block_starts: np.ndarray | None,
        n_blocks: int,
        seq_len: int,
        seed: int,
        epoch: int,
        shuffle: bool,
        rank: int,
        world_size: int,
        start: int,
        dtype: np.dtype[Any] | None = None,
    ) -> None:
        self._views, self._starts, self._block_starts = views, starts, block_starts
        self.dtype = dtype  # None: the stored type, zero-copy
        self.n_blocks, self.seq_len = n_blocks, seq_len
        self.seed, self.epoch, self.shuffle = seed, epoch, shuffle
        self.rank, self.world_size = rank, world_size
        self.position = start
        self.batch_size = 1  # DataLoader batch size, for splitting among its workers
        if not 0 <= start <= len(self):  # a resume from another run's count, not silence
            unit = "rows" if seq_len == 0 else "blocks"
            raise CurateError(
                f"start {start} is outside this rank's {len(self)} {unit} per epoch "
                f"(rank {rank} of {world_size}): start counts this rank's samples, from 0"
            )

    def __len__(self) -> int:
        """Blocks per rank in one epoch (every rank gets the same number)."""
        return self.n_blocks // self.world_size

    @cached_property
    def _order(self) -> np.ndarray:
        n = len(self) * self.world_size
        if self.shuffle:
            perm = np.random.default_rng([self.seed, self.epoch]).permutation(self.n_blocks)
        else:
            perm = np.arange(self.n_blocks)
        return perm[:n][self.rank :: self.world_size]

    def block_index(self, k: int) -> int:
        """Which block of the version is this rank's sample k."""
        return int(self._order[k])

    def __getitem__(self, k: int) -> np.ndarray:
        if not 0 <= k < len(self):
            raise IndexError(k)
        return self._cast(self._read(self.block_index(k)))

    def _read(self, block: int) -> np.ndarray:
        begin = (
            int(self._block_starts[block])
            if self._block_starts is not None
            else block * self.seq_len
        )
        end = begin + self.seq_len
        i = int(np.searchsorted(self._starts, begin, side="right")) - 1
        lo = begin - int(self._starts[i])
        view = self._views[i]
        if lo + self.seq_len <= len(view):
            return view[lo : lo + self.seq_len]  # a view: no copy
        pieces, pos = [], begin
        while pos < end:  # a block across two shards' chunks: one small copy
            j = int(np.searchsorted(self._starts, pos, side="right")) - 1
            off = pos - int(self._starts[j])
            take = min(end - pos, len(self._views[j]) - off)
            pieces.append(self._views[j][off : off + take])
            pos += take
        return np.concatenate(pieces)

    def _cast(self, block: Any) -> Any:
        return block if self.dtype is None else block.astype(self.dtype)

    @staticmethod
    def _own(block: Any) -> Any:
        """A writable array, for torch (the views are read-only; a converted block or one
        joined across shards is already a fresh array)."""
        return block if block.flags.owndata and block.flags.writeable else block.copy()

    def __iter__(self) -> Iterator[np.ndarray]:
        while self.position < len(self):
            block = self[self.position]
            self.position += 1
            yield block

    def state_dict(self) -> dict[str, int]:
        """What a checkpoint needs to resume exactly here."""
        return {"position": self.position, "seed": self.seed, "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["seed"] != self.seed:
            raise CurateError(
                f"resuming with seed {self.seed}, the checkpoint used {state['seed']}"
            )
        self.position = state["position"]
        if state["epoch"] != self.epoch:
            self.epoch = state["epoch"]
            self.__dict__.pop("_order", None)

    def torch(self, batch_size: int = 1) -> Any:
        """The same blocks as a `torch.utils.data.IterableDataset` (imports torch); give the
        DataLoader's batch_size so that several workers keep the order exact."""
        cls = torch_class(TokenBlocks)
        out = cls(self._views, self._starts, self._block_starts, self.n_blocks, self.seq_len,
                  self.seed, self.epoch, self.shuffle, self.rank, self.world_size,
                  self.position, dtype=self.dtype)  # fmt: skip
        out.batch_size = batch_size
        return out
