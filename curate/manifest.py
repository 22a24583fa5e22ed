"""The manifest: one JSON document per version that explains how it was made.

The models here are the single source of `schemas/manifest.schema.json`. The
manifest never holds document text or detected personal data: only ids, counts,
parameters, checksums and versions.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from curate.errors import CurateError
from curate.mixture_record import MixtureRecord

FORMAT_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputRecord(_Model):
    name: str = Field(description="The input as ids and messages name it.")
    path: str
    format: str
    size: int
    mtime_ns: int
    content_hash: str = Field(description="xxh3_128 of the file's bytes (folders: of its files).")
    documents: int = Field(description="Documents read from this input.")
    quarantined: int = Field(0, description="Records of this input set aside as unreadable.")
    partitions: int


class PartitionEntry(_Model):
    key: str = Field(
        description="The partition's identity, which its shards' names and packed rows' ids "
        "carry: 16 hex digits of sha256 of the JSON [input, unit, start, stop]."
    )
    input: str = Field(description="The input's name, as `inputs` names it.")
    unit: str = Field(
        description="What start and stop count: bytes, stream (a compressed file, whole), "
        "row_groups, record_batches or members (of a folder)."
    )
    start: int
    stop: int = Field(description="Exclusive.")
    digest: str = Field(description="xxh3_128 of the bytes the range covers, taken when read.")
    documents: int = Field(description="Documents read from this partition.")
    quarantined: int = Field(0, description="Records of it set aside as unreadable.")


class StageRecord(_Model):
    position: int
    name: str
    kind: str = Field(description="map or barrier")
    params: dict[str, Any]
    docs_in: int
    docs_out: int
    changed: int
    removed: dict[str, int]
    counters: dict[str, int] = Field(
        default_factory=dict,
        description="Stage-specific tallies summed over batches and partitions "
        "(documents per detected language, per benchmark).",
    )
    seconds: float = Field(description="Worker seconds summed over partitions.")
    software: dict[str, str] = Field(
        description="What its output depends on besides data and parameters: library versions, "
        "files it reads (a tokenizer's sha256), and code_sha256, the hash of its code (its "
        "module and the modules of its package that module imports)."
    )
    details: dict[str, Any] = Field(default_factory=dict)
    cache: StageCacheRecord | None = Field(
        None, description="What the stage cache gave this stage (absent: the cache was off)."
    )


class StageCacheRecord(_Model):
    """Per stage: partitions whose output (a barrier: whose summary basis) came from the
    stage cache, partitions that ran it, and the runs that wrote what was reused."""

    reused: int = Field(description="Partitions whose output was taken from the cache.")
    ran: int = Field(description="Partitions that ran the stage (and kept its output).")
    reused_from: list[str] = Field(
        default_factory=list,
        description="The versions the runs that kept the reused entries published (a run "
        "that published none: its fingerprint's first 16 hex digits).",
    )
    computed_seconds: float = Field(
        0.0, description="Worker seconds the reused output took the runs that computed it."
    )
    read_seconds: float = Field(
        0.0, description="Worker seconds this run spent reading reused entries back."
    )
    read_bytes: int = Field(0, description="Bytes of the reused entries read back.")
    docs_computed: int | None = Field(
        None,
        description="A barrier: documents whose summary basis this run computed. A map "
        "stage after a changed decision: documents it ran on, those the cache did not hold "
        "and those counted out of its entries (`curate.cache.by_document`).",
    )
    docs_reused: int | None = Field(
        None,
        description="A barrier: documents whose summary basis came from the cache (from an "
        "entry of the same rows, or by document id from one of the same partition's "
        "documents under another earlier decision). A map stage after a changed decision: "
        "documents whose outcome came from its entries kept under another decision.",
    )


class FileRecord(_Model):
    path: str = Field(description="Relative to the version folder.")
    rows: int
    bytes: int
    sha256: str
    tokens: int | None = Field(None, description="Token ids in the shard (tokenized data).")
    documents: int | None = Field(
        None, description="Packed shards: documents whose last token is in this shard."
    )
    split: str | None = Field(None, description="Versions with splits: the shard's split.")


class StatisticsFile(_Model):
    """The version's statistics (`curate.stats.document`), checked by `curate verify` as a
    shard is."""

    path: str = Field(description="Relative to the version folder: statistics.json.")
    bytes: int
    sha256: str
    format_version: int = Field(description="The file's own format_version.")


class CardFile(_Model):
    """The version's dataset card (`README.md`, `curate.output.card`), hashed as a shard is."""

    path: str = Field(description="Relative to the version folder: README.md.")
    bytes: int
    sha256: str


class SplitRecord(_Model):
    fraction: float = Field(description="Share of documents asked for (train: the rest).")
    documents: int = Field(description="Documents written to this split.")
    rows: int = Field(description="Rows in its shards (packed rows hold several documents).")
    tokens: int | None = Field(None, description="Token ids in its shards (tokenized data).")
    shards: int
    bytes: int


class Splits(_Model):
    method: str = Field(description="How a document's split is decided.")
    seed: int
    splits: dict[str, SplitRecord] = Field(description="Split name -> what it holds, in order.")


class Packing(_Model):
    kind: str = Field(description="tokens (fixed-length rows) or conversations (ragged rows).")
    seq_len: int
    tokens: int = Field(description="Token ids in all shards, tail shards included.")
    tokens_in_full_rows: int | None = Field(
        None,
        description="tokens: ids in rows of exactly seq_len, what blocks(seq_len) serves "
        "(every row but each tail shard's last); conversations: null (rows are ragged).",
    )
    tail_tokens: int = Field(
        description="Token ids in the tail shards: every partition's short last row, packed "
        "together at publish."
    )
    tokens_lost: int = Field(
        description="tokens: ids in the short last row of each tail shard, which "
        "blocks(seq_len) skips; conversations: 0 (rows() reads every row)."
    )
    lost_fraction: float = Field(description="tokens_lost / tokens.")
    tail_shards: list[str] = Field(description="The tail shards' paths (one per split).")


class Counts(_Model):
    read: int = Field(description="Records met in the inputs: documents plus quarantined.")
    documents: int = Field(description="Records that became documents.")
    written: int
    removed: dict[str, dict[str, int]] = Field(description="stage label -> reason -> count")
    removed_total: int
    quarantined: int
    quarantined_bytes: int = 0


class Manifest(_Model):
    format_version: int = FORMAT_VERSION
    dataset: str
    version: str
    fingerprint: str
    parents: list[str] = Field(
        default_factory=list, description="Curate versions this one was read from."
    )
    recipe: dict[str, Any]
    recipe_path: str | None
    inputs: list[InputRecord]
    partitions: list[PartitionEntry] = Field(
        default_factory=list,
        description="Every partition read, in input order: the shards' order is theirs.",
    )
    stages: list[StageRecord]
    schema_: list[dict[str, str]] = Field(alias="schema")
    shards: list[FileRecord]
    rejected: list[FileRecord]
    quarantine: list[FileRecord]
    examples: list[FileRecord] = Field(
        default_factory=list,
        description="Removed documents kept as examples (`curate.examples.files`), per "
        "stage; texts and ids through the recipe's pii stages.",
    )
    lineage: list[FileRecord] | None = Field(
        None,
        description="Where each written document came from (input, line, offset) and where it "
        "is (shard, row, token start): lineage/documents.arrow and its index by id hash, "
        "lineage/ids.arrow (curate.lineage); absent in versions made before lineage.",
    )
    forgotten: dict[str, Any] | None = Field(
        None,
        description="Documents `curate forget` removed (curate.forget): `documents` excluded "
        "in all, `dropped` from this version's shards, and each request's `reason`, count "
        "and time; absent when none was.",
    )
    statistics: StatisticsFile | None = Field(
        None,
        description="What each stage did in counts and fixed-bin histograms (absent: the "
        "recipe said output.stats: false, or an older curate built the version).",
    )
    counts: Counts
    tokens: int | None = Field(None, description="Token ids in all shards (tokenized data).")
    splits: Splits | None = Field(
        None,
        description="Held-out splits (recipe `split:`): the method and seed, and per split its "
        "documents, rows, tokens and shards; their documents sum to counts.written.",
    )
    layout: Literal["dataset_dict"] | None = Field(
        None,
        description="How the folder is laid out for `datasets` (curate.hf_layout): "
        "'dataset_dict', dataset_dict.json on top and one folder per split (a version without "
        "splits is one split, train, whose state.json lists ../shards/...), which both "
        "load_dataset and load_from_disk read; absent in versions made before it, where a "
        "version without splits has state.json on top (load_from_disk's only). Absent in "
        "mixtures (no datasets layout).",
    )
    packing: Packing | None = Field(
        None,
        description="Packed versions: where the tokens are, and how many the short rows "
        "lose (partitions write full rows; their tails are packed into one tail shard).",
    )
    card: CardFile | None = Field(
        None,
        description="The dataset card (README.md in the Hugging Face layout), generated from "
        "this manifest; absent in versions made before cards.",
    )
    mixture: MixtureRecord | None = Field(
        None,
        description="A mixture version (`curate mix`): its sources by dataset, version and "
        "fingerprint, what each was asked and gave, and the index of its samples in order.",
    )
    software: dict[str, str]
    host: dict[str, Any]
    engine: dict[str, Any]
    timings: dict[str, float]
    started: str
    finished: str

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def reconcile(counts: Counts) -> None:
    """Every record is accounted for, or the version is not published."""
    if counts.read != counts.written + counts.removed_total + counts.quarantined:
        raise CurateError(
            f"internal accounting error: read {counts.read} != written {counts.written} "
            f"+ removed {counts.removed_total} + quarantined {counts.quarantined}; "
            "nothing was published"
        )
    if counts.documents != counts.read - counts.quarantined:
        raise CurateError("internal accounting error: documents != read - quarantined")
