"""A torchdata `StatefulDataLoader` whose state is one global position, at any worker count.

torchdata records, for each DataLoader worker, the state its dataset had when the main
process took that worker's last batch: what was consumed, not what workers prefetched.
Each worker's state holds the global position after its last sample; workers hand out
batches in turn, so the largest of them is where the main process stands. `state_dict()`
gives just that position (`blocks.state_dict()`'s small dict), the same on every rank;
`load_state_dict()` starts the next iteration there, with any number of workers or ranks.
torchdata is imported when a loader is made, never by `import curate.loader`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from curate.loader.blocks import TokenBlocks

_CLASS: list[type] = []


def data_loader(dataset: TokenBlocks, batch_size: int = 1, **kwargs: Any) -> Any:
    """A `StatefulDataLoader` over `blocks()` or `rows()` (keyword arguments as torch's
    DataLoader: `num_workers`, `prefetch_factor`, `collate_fn`, ...), checkpointed by a
    position that holds for any world size and worker count."""
    if not _CLASS:
        _CLASS.append(_make_class())
    return _CLASS[0](dataset.torch(batch_size=batch_size), batch_size=batch_size, **kwargs)


def _make_class() -> type:
    from torchdata.stateful_dataloader import StatefulDataLoader

    class ElasticDataLoader(StatefulDataLoader):
        def __init__(self, dataset: Any, **kwargs: Any) -> None:
            kwargs["snapshot_every_n_steps"] = 1  # a snapshot at every batch: exact
            super().__init__(dataset, **kwargs)

        def state_dict(self) -> dict[str, int]:
            """The global position: samples all ranks together took from the loader."""
            state: dict[str, int] = self.dataset.state_dict()
            if self.num_workers == 0 or self._iterator is None:
                return state  # the dataset itself is iterated here, or not yet at all
            full = super().state_dict()
            workers = full["_snapshot"]["_worker_snapshots"].values()
            found = [w["dataset_state"]["consumed"] for w in workers if w and w["dataset_state"]]
            return {**state, "consumed": max(found, default=state["consumed"])}

        def load_state_dict(self, state: dict[str, int]) -> None:
            self.dataset.load_state_dict(state)
            self._iterator = None  # the next iteration starts at the loaded position
            self.next_iter_state = None

    return ElasticDataLoader
