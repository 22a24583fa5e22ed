"""Fixed-length token blocks read from one global, seeded stream that ranks share.

The stream (`curate.loader.stream`) is the concatenation of per-epoch permutations of the
blocks, seeded by (seed, epoch); rank r of w reads every w-th sample of it from the
position, the number of samples all ranks together have consumed. That position is the
same on every rank and means the same thing at any world size or DataLoader worker count,
so a run stopped with 8 ranks resumes with 6 or 12 at exactly the next unread sample.
`Rows` reuses this order for whole rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from curate.errors import CurateError
from curate.loader.stream import Permutation, SampleOrder, Stream
from curate.loader.torch_dataset import torch_class


def refuse_start(start: int | None, world_size: int) -> None:
    """`start` counted one rank's samples, so its meaning changed with the world size."""
    if start is not None:
        raise CurateError(
            f"start={start} counted this rank's samples and is no longer accepted: the "
            "position is now global, the samples all ranks consumed together; pass "
            f"position=start * world_size (here position={start * world_size}), or restore "
            "the loader's state_dict()"
        )


class TokenBlocks:
    """An iterable of fixed-length token blocks: this rank's share of the global stream."""

    start: int  # the global position this rank's sample 0 follows from
    position: int  # samples all ranks together have consumed (this rank's view of it)

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
        position: int = 0,
        dtype: np.dtype[Any] | None = None,
        epochs: int | None = 1,
        order: SampleOrder | None = None,
    ) -> None:
        self._views, self._starts, self._block_starts = views, starts, block_starts
        self.dtype = dtype  # None: the stored type, zero-copy
        self.n_blocks, self.seq_len = n_blocks, seq_len
        self.seed, self.epoch, self.shuffle = seed, epoch, shuffle
        self.rank, self.world_size = rank, world_size
        self.stream = Stream(order or Permutation(n_blocks, seed, shuffle), epoch, epochs)
        self.batch_size = 1  # DataLoader batch size, for splitting among its workers
        self._begin(position)

    def _begin(self, position: int) -> None:
        """Read from global position `position` on: `start` is where this rank's sample 0
        lies, `position` advances by world_size per sample this rank yields."""
        self.stream.check(position)
        self.start = self.position = position

    def __len__(self) -> int:
        """Samples this rank reads from `start` (every rank the same number)."""
        n = self.stream.per_rank(self.start, self.world_size)
        if n is None:
            raise TypeError("an endless stream (epochs=None) has no length")
        return n

    def _remaining(self) -> int | None:
        return self.stream.per_rank(self.start, self.world_size)

    def global_index(self, k: int) -> int:
        """Where this rank's sample k lies in the global stream."""
        return self.start + self.rank + self.world_size * k

    def block_index(self, k: int) -> int:
        """Which block of the version is this rank's sample k."""
        block = self.stream.sample(self.global_index(k))
        if not 0 <= block < self.n_blocks:  # a SampleOrder naming a block we do not have
            raise CurateError(f"the sample order names sample {block}; there are {self.n_blocks}")
        return block

    def __getitem__(self, k: int) -> Any:
        n = self._remaining()
        if k < 0 or (n is not None and k >= n):
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

    def __iter__(self) -> Iterator[Any]:
        n = self._remaining()
        k = (self.position - self.start) // self.world_size
        while n is None or k < n:
            block = self[k]
            k += 1
            self.position = self.start + self.world_size * k  # before the yield: consumed
            yield block

    def worker_share(self, worker: int, workers: int) -> Iterator[Any]:
        """DataLoader worker `worker`'s samples (writable copies, for torch).

        DataLoader takes one batch from each worker in turn: worker w yields the w-th of
        every `workers` batches, so the main process still sees this rank's samples in
        order (given the DataLoader's batch_size). Each worker's `position` is the global
        position after its last sample; that of the last batch the main process took is
        where the loader stands (`curate.loader.elastic`)."""
        b, n = self.batch_size, self._remaining()
        first = (self.position - self.start) // self.world_size + worker * b
        while n is None or first < n:
            for k in range(first, first + b if n is None else min(first + b, n)):
                sample = self._own(self[k])
                self.position = self.start + self.world_size * (k + 1)
                yield sample
            first += workers * b

    def state_dict(self) -> dict[str, int]:
        """The global position (samples all ranks consumed together) and what it counts in:
        the same on every rank, and valid at any world size or number of workers."""
        return {
            "consumed": self.position,
            "seed": self.seed,
            "epoch": self.epoch,
            "samples_per_epoch": self.stream.order.samples_per_epoch,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        if "consumed" not in state and "position" in state:
            raise CurateError(
                f"this state_dict's position {state['position']} counts one rank's samples "
                "(the per-rank loader before the global stream): give "
                "{'consumed': position * world_size it was saved with, 'seed': ..., 'epoch': ..., "
                f"'samples_per_epoch': {self.stream.order.samples_per_epoch}}}"
            )
        if state["seed"] != self.seed:
            raise CurateError(
                f"resuming with seed {self.seed}, the checkpoint used {state['seed']}"
            )
        ours = self.stream.order.samples_per_epoch
        if state.get("samples_per_epoch", ours) != ours:
            raise CurateError(
                f"the checkpoint's stream has {state['samples_per_epoch']} samples per epoch, "
                f"this one {ours}: another version, split or seq_len"
            )
        if state["epoch"] != self.epoch:
            self.epoch = self.stream.first_epoch = state["epoch"]
        self._begin(state["consumed"])

    def torch(self, batch_size: int = 1) -> Any:
        """The same blocks as a `torch.utils.data.IterableDataset` (imports torch); give the
        DataLoader's batch_size so that several workers keep the order exact."""
        out = object.__new__(torch_class(type(self)))
        out.__dict__.update(self.__dict__)
        out.batch_size = batch_size
        return out
