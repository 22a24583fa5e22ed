"""The loader's iterables as torch `IterableDataset`s, made only once torch is imported.

Nothing in `curate.loader` imports torch at import time: a class that is both a
`TokenBlocks` (or `Rows`) and an `IterableDataset` is made on first use and remembered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from curate.loader.blocks import TokenBlocks

B = TypeVar("B", bound="TokenBlocks")
_TORCH_CLASSES: dict[type, type] = {}


def torch_class(base: type[B]) -> type[B]:
    """`base` (TokenBlocks or Rows) that is also a torch IterableDataset; DataLoader workers
    split the order."""
    found = _TORCH_CLASSES.get(base)
    if found is not None:
        return found
    if base in _TORCH_CLASSES.values():  # already a torch one
        return base
    from torch.utils.data import IterableDataset, get_worker_info

    class TorchTokenBlocks(base, IterableDataset):  # type: ignore[valid-type,misc]
        def __iter__(self) -> Iterator[Any]:
            info = get_worker_info()
            # Copies: a block is small, and torch wants writable arrays (the views are read-only).
            if info is None:
                for block in base.__iter__(self):
                    yield self._own(block)
                return
            yield from self.worker_share(info.id, info.num_workers)

    TorchTokenBlocks.__name__ = TorchTokenBlocks.__qualname__ = f"Torch{base.__name__}"
    _TORCH_CLASSES[base] = TorchTokenBlocks
    return TorchTokenBlocks
