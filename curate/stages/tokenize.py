"""Tokenizing with the base model's own tokenizer, into ids a trainer memory-maps.

A map stage: each batch's texts go through the family's fastest exact encoder (see
`curate.tokenizers.encoders`), the BOS/EOS policy adds the control ids around each
document, and the ids are stored as the narrowest unsigned type that holds the
vocabulary. The tokenizer is built in `setup()`, once per worker, and never pickled.
Packing into fixed-length rows, when asked, happens in the shard writer per partition
(`curate.output.packing`), so it does not depend on batch sizes.

At the end of a pass, the local engine's idle workers help a busy one
(`curate.engines.help_desk`): a batch then goes through the encoder in pieces of about
`PIECE_CHARS` characters per encoder thread, which they may take (`help_with`). Each
text encodes on its own (a long one cut only within itself, `curate.tokenizers.long_texts`),
so the ids are the same whichever process encoded which piece, and the same as one call
over the batch.

The fingerprint covers each tokenizer file's sha256 and the encoding library's
version; the manifest records the tokenizer's source, files, vocabulary, special
tokens and the BOS/EOS policy actually applied.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from curate.io.batches import ID
from curate.output.packing import NUM_TOKENS, TOKENS, PackSpec
from curate.stages import shared_work
from curate.stages.base import MapStage, StageContext, StageParams, StageResult, rejected_table
from curate.tokenizers.encoders import Encoder, library_versions, load_encoder
from curate.tokenizers.identity import file_digests, fingerprint_of
from curate.tokenizers.policy import Policy, resolve_policy
from curate.tokenizers.source import TokenizerSource, resolve_source


class PackParams(StageParams):
    seq_len: int = Field(ge=2, description="Tokens per packed row.")


class TokenizeParams(StageParams):
    source: str = Field(
        description="tokenizer.json, a model folder, a SentencePiece .model, a .tiktoken ranks "
        "file, a tekken .json, or a hub model id in the local HF cache; relative to the recipe."
    )
    kind: Literal["auto", "tokenizer.json", "sentencepiece", "tekken", "tiktoken"] = Field(
        "auto", description="Tokenizer family; auto: from the file."
    )
    bos: Literal["auto", True, False] = Field(
        "auto", description="Add BOS before each document; auto: as the model's config says."
    )
    eos: bool = Field(True, description="Add EOS after each document (the separator).")
    bos_token: str | None = Field(None, description="BOS token, when the model does not say.")
    eos_token: str | None = Field(None, description="EOS token, when the model does not say.")
    keep_text: bool = Field(False, description="Keep the text column beside the ids.")
    pack: PackParams | None = Field(
        None,
        description="Pack into fixed-length rows per partition, their short last rows packed "
        "together into one tail shard at publish: {seq_len: 2048}.",
    )
    pattern: str | None = Field(
        None, description="tiktoken ranks only: split regex or preset (cl100k_base)."
    )
    special_tokens: dict[str, int] = Field(
        default_factory=dict, description="tiktoken ranks only: special tokens and their ids."
    )
    threads: int | None = Field(
        None, ge=1, description="Encoder threads per worker; default: the worker's CPU share."
    )


PIECE_CHARS = 1 << 18  # per encoder thread: a share an idle worker takes, ~0.02 s of tekken's
# work; a call splits its piece between the threads, so each still gets this much


def id_type(vocab_size: int) -> pa.DataType:
    """The narrowest unsigned type that holds every id."""
    return pa.uint16() if vocab_size <= 1 << 16 else pa.uint32()


class Tokenize(MapStage[TokenizeParams]):
    """Token ids from the base model's own tokenizer (exact), with an explicit BOS/EOS policy."""

    name = "tokenize"
    Params = TokenizeParams
    reads = ("text",)

    def __init__(self, params: TokenizeParams, context: StageContext | None = None) -> None:
        super().__init__(params, context)
        self.base_dir = self.context.base_dir

    # -- what the tokenizer is (cheap: no tokenizer library is imported) --------------

    @property
    def source(self) -> TokenizerSource:
        found: TokenizerSource | None = self.__dict__.get("_source")
        if found is None:
            found = resolve_source(self.params.source, self.base_dir, self.params.kind)
            self.__dict__["_source"] = found
        return found

    def software(self) -> dict[str, str]:
        soft = library_versions(self.source)
        soft.update({f"tokenizer_sha256:{k}": v for k, v in file_digests(self.source).items()})
        return soft

    def tokenizer_fingerprint(self) -> str:
        return fingerprint_of(self.source, self.params.pattern)

    # -- the loaded tokenizer (once per process) --------------------------------------

    def setup(self) -> None:
        self.encoder(warm=True).warm()

    def encoder(self, warm: bool = False) -> Encoder:
        """The loaded tokenizer; `warm` where documents will be encoded (a worker)."""
        enc: Encoder | None = self.__dict__.get("_encoder")
        if enc is None:
            threads = self.params.threads or max(1, pa.cpu_count())
            enc = load_encoder(
                self.source, threads=threads, pattern=self.params.pattern,
                special_tokens=self.params.special_tokens, warm=warm,
            )  # fmt: skip
            self.__dict__["_encoder"] = enc
            self.__dict__["_policy"] = resolve_policy(
                enc, self.params.bos, self.params.eos, self.params.bos_token, self.params.eos_token
            )
        return enc

    def policy(self) -> Policy:
        self.encoder()
        policy: Policy = self.__dict__["_policy"]
        return policy

    def id_type(self) -> pa.DataType:
        return id_type(self.encoder().vocab_size)

    def describe(self) -> dict[str, Any]:
        enc = self.encoder()
        src = self.source
        info: dict[str, Any] = {
            "tokenizer": {
                "source": self.params.source,
                "kind": src.kind,
                "path": str(src.main),
                "files": file_digests(src),
                "fingerprint": self.tokenizer_fingerprint(),
                **({"pattern": self.params.pattern or ""} if src.kind == "tiktoken" else {}),
                "vocab_size": enc.vocab_size,
                "id_type": str(self.id_type()),
                "special_tokens": dict(sorted(enc.special.items(), key=lambda kv: kv[1])[:64]),
                "special_tokens_total": len(enc.special),
                "policy": self.policy().to_dict(),
                "encoder": enc.library,
            }
        }
        if self.params.pack is not None:
            info["pack"] = {
                "seq_len": self.params.pack.seq_len,
                "where": "shard writer, per partition",
            }
        return info

    # -- schema and packing ---------------------------------------------------------

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        spec = self.pack_spec()
        if spec is not None:
            return spec.output_schema()
        if not self.params.keep_text and self.text_field in schema.names:
            schema = schema.remove(schema.get_field_index(self.text_field))
        schema = schema.append(pa.field(TOKENS, pa.list_(self.id_type())))
        return schema.append(pa.field(NUM_TOKENS, pa.int32()))

    def pack_spec(self) -> PackSpec | None:
        if self.params.pack is None:
            return None
        return PackSpec(self.params.pack.seq_len, self.id_type())

    # -- the work ---------------------------------------------------------------------

    def process(self, batch: pa.RecordBatch) -> StageResult:
        enc = self.encoder()
        policy = self.policy()
        i = batch.schema.get_field_index(self.text_field)
        texts = [t or "" for t in batch.column(i).to_pylist()]
        most = PIECE_CHARS * enc.threads
        cuts = shared_work.runs(map(len, texts), most) if shared_work.sharing() else []
        if len(cuts) > 1:
            pieces = [texts[a:b] for a, b in cuts]
            done = shared_work.each(self, pieces, self.help_with, _chars)
            flat = np.concatenate([ids for ids, _ in done])
            lengths = np.concatenate([n for _, n in done])
        else:
            flat, lengths = enc.encode(texts)
        removed = None
        empty = lengths == 0
        if empty.any():
            ids = batch.column(ID).filter(pa.array(empty))
            removed = rejected_table(self.name, ids, ["empty"] * len(ids))
            batch = batch.filter(pa.array(~empty))
            lengths = lengths[~empty]
        flat, lengths = policy.apply(flat, lengths)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = pa.array(flat.astype(self.id_type().to_pandas_dtype(), copy=False))
        input_ids = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
        if not self.params.keep_text:
            batch = batch.drop_columns([self.text_field])
        batch = batch.append_column(pa.field(TOKENS, input_ids.type), input_ids)
        batch = batch.append_column(NUM_TOKENS, pa.array(lengths.astype(np.int32)))
        return StageResult(batch, removed=removed)

    def help_with(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """One piece of a batch encoded (`curate.stages.shared_work`): its ids and each
        text's length. Any worker that has set this stage up loads the same tokenizer from
        the same files, so it gives the same ids."""
        return self.encoder().encode(texts)


def _chars(texts: list[str]) -> int:
    return sum(map(len, texts))
