"""What trainers use to read tokens back: memory-mapped, never widened, resumable.

```python
from curate.loader import open_tokens
tokens = open_tokens("datasets/pretrain", tokenizer="models/my-model")  # refuses a mismatch
ds = tokens.dataset()                          # memory-mapped datasets.Dataset (arrow format)
blocks = tokens.blocks(2048, seed=1, rank=rank, world_size=world, start=resume_at)
for block in blocks: ...                       # numpy uint16/uint32, length 2048
```

Blocks are cut from the token stream of the whole version (documents in shard order,
each ending with its EOS separator); when the version was packed with the same length,
the packed rows are the blocks. The order is a permutation seeded by (seed, epoch);
rank r of w takes every w-th block of it, and every rank gets the same number. A
position is the index of the next block for this rank, so resuming at sample k reads
nothing before it. Nothing here imports torch: when the trainer has imported it,
`blocks()` returns a `torch.utils.data.IterableDataset` (or ask with `.torch()`) that
yields the same numpy blocks and splits them among DataLoader workers; the default
collate makes them uint16/uint32 tensors. `dtype=` (`blocks(2048, dtype=torch.int64)`, or
`"int64"`, `np.int32`) converts each block or row as it is read (one copy of a small
array), for what an embedding lookup takes; a type that cannot hold every stored id is
refused.

A version made with `split:` is read one split at a time (`split="validation"`; the
default is `train`). Fine-tuning versions (`chat_template`) open the same way; their
packed rows hold whole conversations of different lengths, so they are read as rows
(`dataset()`: `input_ids`, `labels`, `position_ids`, `cu_seqlens` in their stored
types), never cut into fixed-length blocks.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa

from curate.errors import CurateError
from curate.version import Version
from curate.version import open as open_version

if TYPE_CHECKING:
    import datasets

    from curate.loader_rows import Rows

TOKENS = "input_ids"


class TokenizerMismatch(CurateError):
    """The version was tokenized with another tokenizer than the trainer's."""


def _tokenizer_record(version: Version) -> tuple[dict[str, Any], dict[str, Any]]:
    for stage in version.manifest["stages"]:
        details = stage.get("details", {})
        info = details.get("tokenizer")
        if isinstance(info, dict):
            return info, details.get("pack") or {}
        if "chat_template" in details:
            return _chat_tokenizer(version, stage), details.get("pack") or {}
    raise CurateError(f"{version.path} holds no tokens: its recipe has no tokenize stage")


def _chat_tokenizer(version: Version, stage: dict[str, Any]) -> dict[str, Any]:
    """The tokenizer record of a chat_template stage: its tokenizer file, fingerprinted as
    `curate.tokenizers.tokenizer_fingerprint` does (from the file digest the stage recorded)."""
    main = str(stage["details"]["chat_template"]["tokenizer"])
    kind = stage["details"]["chat_template"].get("tokenizer_kind", "tokenizer.json")
    digest = stage["software"].get(f"tokenizer_sha256:{Path(main).name}", "")
    from curate.tokenizers.identity import fingerprint_from

    pattern = stage["details"]["chat_template"].get("pattern")  # tiktoken ranks only
    types = {f["name"]: f["type"] for f in version.manifest["schema"]}
    id_type = "uint32" if "uint32" in types.get(TOKENS, "") else "uint16"
    return {
        "source": main,
        "kind": kind,
        **({"pattern": pattern} if pattern is not None else {}),
        "fingerprint": fingerprint_from(kind, digest, pattern),
        "id_type": id_type,
    }


def open_tokens(
    path: str | Path,
    version: str = "LATEST",
    *,
    tokenizer: str | Path | None = None,
    ignore_tokenizer_mismatch: bool = False,
    split: str | None = None,
) -> Tokens:
    """A tokenized version (a version folder, or a dataset folder and a version name).

    `split` chooses a split of a version made with `split:` (default `train`).

    `tokenizer` is the trainer's own tokenizer (a path as a recipe names it, or its
    fingerprint from `curate.tokenizers.tokenizer_fingerprint`); a version tokenized with
    a different one is refused unless `ignore_tokenizer_mismatch` is set.
    """
    tokens = Tokens(open_version(path, version), split=split)
    if tokenizer is not None:
        tokens.check_tokenizer(tokenizer, ignore=ignore_tokenizer_mismatch)
    return tokens


class Tokens:
    """The token ids of one published version."""

    def __init__(self, version: Version, split: str | None = None) -> None:
        self.version = version
        self.split = split if split is not None or not version.splits else "train"
        version.split_shard_paths(self.split)  # an unknown split fails here, by name
        self.tokenizer, self.pack = _tokenizer_record(version)

    def __repr__(self) -> str:
        split = f" {self.split}" if self.split else ""
        packed = f", packed {self.pack['seq_len']}" if self.pack.get("seq_len") else ""
        return (
            f"Tokens({self.version.dataset} {self.version.name}{split}: {self.num_tokens:,} "
            f"{self.dtype} tokens{packed}, tokenizer {self.tokenizer['source']})"
        )

    @property
    def fingerprint(self) -> str:
        return str(self.tokenizer["fingerprint"])

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype(self.tokenizer["id_type"])

    @property
    def num_tokens(self) -> int:
        """Token ids in this split (or in the version, without splits)."""
        splits = self.version.manifest.get("splits")
        if splits and self.split is not None:
            return int(splits["splits"][self.split].get("tokens") or 0)
        return int(self.version.manifest.get("tokens") or 0)

    def check_tokenizer(self, tokenizer: str | Path, *, ignore: bool = False) -> None:
        theirs = str(tokenizer)
        if not re.fullmatch(r"[0-9a-f]{64}", theirs):
            from curate.tokenizers import tokenizer_fingerprint

            theirs = tokenizer_fingerprint(  # a ranks file's pattern is the recipe's: the same
                tokenizer,
                kind=self.tokenizer.get("kind", "auto"),
                pattern=self.tokenizer.get("pattern"),
            )
        if theirs != self.fingerprint and not ignore:
            raise TokenizerMismatch(
                f"{self.version.path} was tokenized with {self.tokenizer['source']} "
                f"(fingerprint {self.fingerprint[:16]}), not with {tokenizer} "
                f"(fingerprint {theirs[:16]}); rebuild the dataset with your tokenizer, or "
                "pass ignore_tokenizer_mismatch=True if you know they encode alike"
            )

    def dataset(self) -> datasets.Dataset:
        """Memory-mapped `datasets.Dataset` in arrow format: ids keep their stored type.

        (`with_format("numpy")` would hand back int64 copies.)
        """
        ds = self.version.to_dataset(self.split)
        assert not isinstance(ds, dict)
        return ds.with_format("arrow")

    @cached_property
    def table(self) -> pa.Table:
        return self.version.to_arrow(self.split)

    @cached_property
    def _chunks(self) -> tuple[list[np.ndarray], np.ndarray]:
        """The token stream as memory-mapped numpy views, and where each one starts."""
        views = []
        for chunk in self.table.column(TOKENS).chunks:
            values = chunk.flatten()
            if len(values):
                views.append(values.to_numpy(zero_copy_only=True))
        starts = np.zeros(len(views) + 1, dtype=np.int64)
        np.cumsum([len(v) for v in views], out=starts[1:])
        return views, starts

    def document(self, i: int) -> np.ndarray:
        """Row i's ids, a view of the memory-mapped shard in the stored type."""
        row = self.table.column(TOKENS)[i]
        values: np.ndarray = row.values.to_numpy(zero_copy_only=True)
        return values

    def rows(
        self,
        columns: list[str] | None = None,
        *,
        seed: int = 0,
        epoch: int = 0,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        start: int = 0,
        dtype: Any = None,
    ) -> Rows:
        """Whole rows for rank `rank` of `world_size`, from its sample `start` on, in the
        order `blocks()` uses: each a dict of numpy views in stored types (default: every
        numeric list column; packed conversations: ids, labels or loss_mask, position_ids,
        cu_seqlens). The way to read packed fine-tuning rows across ranks, resumably.

        `dtype` (a numpy or torch type, or its name: `"int64"`, `torch.int64`) converts
        every column of each row as it is read; the default keeps the stored types."""
        from curate.loader_rows import Rows, list_columns, views

        if not 0 <= rank < world_size:
            raise CurateError(f"rows(): rank {rank} is not in 0..{world_size - 1}")
        names = columns or list_columns(self.table.schema)
        schema = self.table.schema
        stored = [np.dtype(schema.field(n).type.value_type.to_pandas_dtype()) for n in names]
        out = output_dtype(dtype, stored)
        cls: type[Rows] = _torch_class(Rows) if "torch" in sys.modules else Rows
        return cls(views(self.table, names), self.table.num_rows, seed, epoch, shuffle, rank,
                   world_size, start, dtype=out)  # fmt: skip

    def blocks(
        self,
        seq_len: int | None = None,
        *,
        seed: int = 0,
        epoch: int = 0,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        start: int = 0,
        dtype: Any = None,
    ) -> TokenBlocks:
        """Fixed-length blocks for rank `rank` of `world_size`, from its sample `start` on.

        Blocks are views of the memory-mapped shards in the stored type (uint16 or uint32)
        unless `dtype` is given (a numpy or torch type, or its name): `torch.int64` (or
        `"int64"`) gives what `nn.Embedding` takes, one small copy per block."""
        if self.pack.get("kind") == "conversations":
            raise CurateError(
                "blocks(): this version's rows hold whole conversations of different lengths; "
                "read them as rows with rows() or dataset() (position_ids and cu_seqlens keep "
                "each conversation apart)"
            )
        if {"labels", "loss_mask"} & set(self.table.schema.names):
            raise CurateError(  # blocks would cut conversations apart and lose the loss mask
                "blocks(): this version holds conversations whose loss is on the assistant's "
                "tokens only (labels); read them whole with rows() or dataset()"
            )
        seq_len = seq_len or self.pack.get("seq_len")
        if not seq_len:
            raise CurateError("blocks(): give seq_len (this version is not packed)")
        if not 0 <= rank < world_size:
            raise CurateError(f"blocks(): rank {rank} is not in 0..{world_size - 1}")
        out = output_dtype(dtype, [self.dtype])
        views, starts = self._chunks
        if self.pack.get("seq_len") == seq_len:
            lengths = self.table.column("num_tokens").to_numpy()
            row_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            full = row_starts[lengths == seq_len]
            block_starts: np.ndarray | None = full
            n = len(full)
        else:
            block_starts, n = None, int(starts[-1]) // seq_len
        cls = TokenBlocks
        if "torch" in sys.modules:  # the trainer uses torch: be its IterableDataset
            cls = _torch_class(TokenBlocks)
        return cls(views, starts, block_starts, n, seq_len, seed, epoch, shuffle, rank, world_size,
                   start, dtype=out)  # fmt: skip


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
        cls = _torch_class(TokenBlocks)
        out = cls(self._views, self._starts, self._block_starts, self.n_blocks, self.seq_len,
                  self.seed, self.epoch, self.shuffle, self.rank, self.world_size,
                  self.position, dtype=self.dtype)  # fmt: skip
        out.batch_size = batch_size
        return out


def output_dtype(dtype: Any, stored: list[np.dtype[Any]]) -> np.dtype[Any] | None:
    """What `dtype=` asks for, as a numpy type; torch types are taken by name (`torch.int64`
    is int64), so torch need not be imported here. Refused when a stored value may not fit:
    a uint16 id above 127 would wrap in int8."""
    if dtype is None:
        return None
    name = str(dtype)
    try:
        out = np.dtype(name.removeprefix("torch.") if name.startswith("torch.") else dtype)
    except TypeError:
        out = None
    if out is None or out.kind not in "iuf":
        raise CurateError(f"dtype={dtype!r} is not a number type (int64, int32, float32, ...)")
    for kind in stored:
        if not np.can_cast(kind, out, "safe"):
            raise CurateError(
                f"dtype={dtype}: the stored {kind} values do not all fit in {out}; "
                "int64 (or int32) holds every id"
            )
    return out


B = TypeVar("B", bound=TokenBlocks)
_TORCH_CLASSES: dict[type, type] = {}


def _torch_class(base: type[B]) -> type[B]:
    """`base` (TokenBlocks or Rows) that is also a torch IterableDataset; DataLoader workers
    split the order."""
    found = _TORCH_CLASSES.get(base)
    if found is not None:
        return found
    from torch.utils.data import IterableDataset, get_worker_info

    class TorchTokenBlocks(base, IterableDataset):  # type: ignore[valid-type,misc]
        def __iter__(self) -> Iterator[Any]:
            info = get_worker_info()
            # Copies: a block is small, and torch wants writable arrays (the views are read-only).
            if info is None:
                for block in base.__iter__(self):
                    yield self._own(block)
                return
            # DataLoader takes one batch from each worker in turn: worker w yields the
            # w-th of every num_workers batches, so the main process still sees samples
            # position, position+1, ... in order (given the DataLoader's batch_size).
            b, w = self.batch_size, info.num_workers
            for first in range(self.position + info.id * b, len(self), w * b):
                for k in range(first, min(first + b, len(self))):
                    yield self._own(self[k])

    TorchTokenBlocks.__name__ = TorchTokenBlocks.__qualname__ = f"Torch{base.__name__}"
    _TORCH_CLASSES[base] = TorchTokenBlocks
    return TorchTokenBlocks
