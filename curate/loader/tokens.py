"""A published version's tokens: which tokenizer made them, and the ways to read them.

`open_tokens` opens a version and checks the trainer's tokenizer against the one the
manifest records; `Tokens` hands out the memory-mapped dataset, fixed-length blocks
(`curate.loader.blocks`) or whole rows (`curate.loader.rows`).
"""

from __future__ import annotations

import re
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from curate.errors import CurateError
from curate.loader.blocks import TokenBlocks, refuse_start
from curate.loader.dtypes import output_dtype
from curate.loader.rows import Rows, list_columns, views
from curate.loader.stream import SampleOrder
from curate.loader.torch_dataset import torch_class
from curate.mixture_order import MixtureOrder, is_mixture, mixture_rows
from curate.version import Version, hold_sources
from curate.version import open as open_version

if TYPE_CHECKING:
    import datasets

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
        held = version.held_sources  # curate.open() of a mixture holds them already
        self.sources = held or (hold_sources(version) if is_mixture(version) else [])

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
        position: int = 0,
        epochs: int | None = 1,
        dtype: Any = None,
        start: int | None = None,
        order: SampleOrder | None = None,
    ) -> Rows:
        """Whole rows for rank `rank` of `world_size`, from global `position` on, in the
        order `blocks()` uses: each a dict of numpy views in stored types (default: every
        numeric list column; packed conversations: ids, labels or loss_mask, position_ids,
        cu_seqlens). The way to read packed fine-tuning rows across ranks, resumably.

        `dtype` (a numpy or torch type, or its name: `"int64"`, `torch.int64`) converts
        every column of each row as it is read; the default keeps the stored types."""

        if not 0 <= rank < world_size:
            raise CurateError(f"rows(): rank {rank} is not in 0..{world_size - 1}")
        refuse_start(start, world_size)
        names = columns or list_columns(self.table.schema)
        schema = self.table.schema
        stored = [np.dtype(schema.field(n).type.value_type.to_pandas_dtype()) for n in names]
        out = output_dtype(dtype, stored)
        cls: type[Rows] = torch_class(Rows) if "torch" in sys.modules else Rows
        if order is None and is_mixture(self.version):  # a mixture: its samples, index order
            order = MixtureOrder(mixture_rows(self.version))
        return cls(views(self.table, names), self.table.num_rows, seed, epoch, shuffle, rank,
                   world_size, position, dtype=out, epochs=epochs, order=order)  # fmt: skip

    def blocks(
        self,
        seq_len: int | None = None,
        *,
        seed: int = 0,
        epoch: int = 0,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        position: int = 0,
        epochs: int | None = 1,
        dtype: Any = None,
        start: int | None = None,
        order: SampleOrder | None = None,
    ) -> TokenBlocks:
        """Fixed-length blocks for rank `rank` of `world_size`: every `world_size`-th sample
        of the global stream (`epochs` seeded permutations of the blocks, None: endless)
        from `position`, the samples all ranks together have consumed (`state_dict()`).
        `order` replaces the seeded permutation with another `SampleOrder` (a mixture's
        interleaved index); everything else stays the same.

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
        refuse_start(start, world_size)
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
            cls = torch_class(TokenBlocks)
        if order is None:
            order = _mixture_blocks(self.version, block_starts, seq_len, self.pack)
        return cls(views, starts, block_starts, n, seq_len, seed, epoch, shuffle, rank, world_size,
                   position, dtype=out, epochs=epochs, order=order)  # fmt: skip


def _mixture_blocks(
    version: Version, full: np.ndarray | None, seq_len: int, pack: dict[str, Any]
) -> MixtureOrder | None:
    """A mixture's samples as blocks (its packed full rows, in index order); None: no mixture."""
    if not is_mixture(version):
        return None
    if full is None or pack.get("seq_len") != seq_len:
        raise CurateError(
            f"blocks({seq_len}): a mixture is read by its samples: its packed rows "
            f"(blocks({pack.get('seq_len')})) or rows(); its weights hold per sample"
        )
    lengths = version.to_arrow().column("num_tokens").to_numpy()
    full_rows = np.flatnonzero(lengths == seq_len)
    return MixtureOrder(np.searchsorted(full_rows, mixture_rows(version)))
