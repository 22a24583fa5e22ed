"""The published version an export reads: its parts (splits), its shards memory-mapped
batch by batch, and what its manifest says about the tokens (tokenizer, largest id, BOS/EOS
policy, chat labels, packing).

The version is opened as every reader opens one (`curate.open`: held against `curate gc`,
its files checked against the manifest), so a damaged or shortened shard is refused by name
before anything is exported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from curate.output.shards import read_stream
from curate.version import Version
from curate.version import open as open_version

TOKENS = "input_ids"
MIXTURE_ROWS = 1 << 16  # samples gathered per table when a mixture is exported
LOSS_COLUMNS = ("labels", "loss_mask")


@dataclass(frozen=True)
class Part:
    """One split (or the whole version without splits) and the shards that hold it."""

    name: str
    split: str | None
    shards: list[Path]
    rows: int
    tokens: int | None


class Source:
    """A published version, read for export."""

    def __init__(self, version: Version) -> None:
        self.version = version
        self.manifest: dict[str, Any] = version.manifest
        self.columns = [(f["name"], f["type"]) for f in self.manifest["schema"]]
        self.names = [name for name, _ in self.columns]

    @classmethod
    def open(cls, path: str | Path) -> Source:
        return cls(open_version(Path(path)))

    @property
    def label(self) -> str:
        return f"{self.version.dataset} {self.version.name}"

    @property
    def tokenized(self) -> bool:
        return TOKENS in self.names

    @property
    def loss_column(self) -> str | None:
        """labels or loss_mask: a chat version's loss, which a format must carry or refuse."""
        return next((c for c in LOSS_COLUMNS if c in self.names), None)

    @property
    def mixture(self) -> dict[str, Any] | None:
        """A mixture version's record (`curate mix`): its samples are its index's rows."""
        found: dict[str, Any] | None = self.manifest.get("mixture")
        return found

    def parts(self) -> list[Part]:
        if self.mixture is not None:  # one part: its samples in index order, repeats included
            shards, samples = self.version.split_shard_paths(None), int(self.mixture["samples"])
            return [Part("data", None, shards, samples, self.manifest["tokens"])]
        splits = self.manifest.get("splits")
        if not splits:
            shards = self.version.split_shard_paths(None)
            total = self.manifest["tokens"]
            return [Part("data", None, shards, self._rows(None), total)]
        return [
            Part(name, name, self.version.split_shard_paths(name), self._rows(name), rec["tokens"])
            for name, rec in splits["splits"].items()
        ]

    def _rows(self, split: str | None) -> int:
        return sum(int(s["rows"]) for s in self.manifest["shards"] if s.get("split") == split)

    def batches(self, part: Part) -> Iterator[pa.RecordBatch]:
        """The part's rows in order, batch by batch, memory-mapped (no copy)."""
        for path in part.shards:
            yield from read_stream(path).to_batches()

    def tables(self, part: Part) -> Iterator[pa.Table]:
        """The part's rows in order, a table at a time: each shard memory-mapped, or for a
        mixture its samples taken from its shards in index order (`MIXTURE_ROWS` at a time)."""
        if self.mixture is not None:
            yield from _samples(self.version, part.shards)
            return
        for path in part.shards:
            yield read_stream(path)

    # -- what the manifest says about the tokens -----------------------------------------

    def _stage_details(self) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        for stage in self.manifest["stages"]:
            details = stage.get("details", {})
            if isinstance(details.get("tokenizer"), dict):
                return "tokenize", details, stage
            if "chat_template" in details:
                return "chat_template", details, stage
        return None

    def tokenizer(self) -> dict[str, Any] | None:
        """The tokenizer's identity as the export manifest records it: for a tokenize stage
        its vocabulary (added and special tokens included) and the largest id it can produce,
        with the BOS/EOS policy applied; for a chat template, its file and fingerprint."""
        found = self._stage_details()
        if found is None:
            return None
        kind, details, stage = found
        if kind == "tokenize":
            t = details["tokenizer"]
            vocab = int(t["vocab_size"])
            return {
                "stage": "tokenize",
                "source": t["source"],
                "kind": t["kind"],
                "fingerprint": t["fingerprint"],
                "files": t.get("files", {}),
                "vocab_size": vocab,
                "max_id": vocab - 1,
                "special_tokens_total": t.get("special_tokens_total"),
                "stored_type": t.get("id_type"),
                "policy": t.get("policy"),
            }
        from curate.tokenizers.identity import fingerprint_from

        c = details["chat_template"]
        main, tkind, pattern = str(c["tokenizer"]), c.get("tokenizer_kind", "tokenizer.json"), None
        pattern = c.get("pattern")
        digest = stage["software"].get(f"tokenizer_sha256:{Path(main).name}", "")
        return {
            "stage": "chat_template",
            "source": main,
            "kind": tkind,
            "fingerprint": fingerprint_from(tkind, digest, pattern),
            "template_sha256": c.get("sha256"),
            "stored_type": self.stored_type(),
            "policy": {"template": "the chat template places every control token"},
        }

    def stored_type(self) -> str | None:
        """The ids' Arrow type as stored (uint16 or uint32)."""
        types = dict(self.columns)
        kind = types.get(TOKENS)
        if kind is None:
            return None
        return "uint32" if "uint32" in kind else "uint16"

    def packing(self) -> dict[str, Any] | None:
        if self.mixture is not None:  # no packing record of its own: its sources' packing
            found = self._stage_details()
            pack = (found[1].get("pack") or None) if found is not None else None
            return pack if pack and pack.get("seq_len") else None
        return self.manifest.get("packing")

    def manifest_sha256(self) -> str:
        return hashlib.sha256((self.version.path / "manifest.json").read_bytes()).hexdigest()


def _samples(version: Version, shards: list[Path]) -> Iterator[pa.Table]:
    """A mixture's samples (`curate.mixture_order.mixture_rows`), gathered shard by shard:
    each chunk of the index is split by the shard its rows lie in, taken from that shard's
    memory-mapped table and put back in index order."""
    import numpy as np

    from curate.mixture_order import mixture_rows

    tables = [read_stream(p) for p in shards]
    starts = np.zeros(len(tables) + 1, dtype=np.int64)
    np.cumsum([t.num_rows for t in tables], out=starts[1:])
    rows = mixture_rows(version)
    for begin in range(0, len(rows), MIXTURE_ROWS):
        chunk = rows[begin : begin + MIXTURE_ROWS]
        shard = np.searchsorted(starts, chunk, side="right") - 1
        by_shard = np.argsort(shard, kind="stable")
        pieces = []
        for i in np.unique(shard):
            local = chunk[shard == i] - starts[i]
            pieces.append(tables[i].take(pa.array(local)))
        gathered = pa.concat_tables(pieces)
        back = np.empty(len(chunk), dtype=np.int64)
        back[by_shard] = np.arange(len(chunk))
        yield gathered.take(pa.array(back)).combine_chunks()
