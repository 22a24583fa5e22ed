"""Conversations through the base model's own chat template, into ids and a loss mask.

A map stage over the `messages` column (see `curate.chat`): each conversation is
rendered by the model's Jinja chat template in a sandbox, exactly as `transformers`'
`apply_chat_template` renders it, and the text is tokenized as `apply_chat_template(
tokenize=True)` does (the template's special-token strings as their ids, no special
tokens added), by any tokenizer family the tokenize stage loads (`curate.chat.tokens`).
The assistant's tokens are found from the template's `{% generation %}` blocks or,
without them, by rendering prefixes (`curate.chat.mask`), and marked as transformers'
assistant mask marks them; the stage writes `labels` (-100 everywhere else) or a 0/1
`loss_mask`, and `num_tokens`.

Conversations longer than `max_len` are dropped or truncated, as the recipe says, and
counted. A template error removes the conversation: a template's own `raise_exception`
(roles that do not alternate, say) as `template_raised`, any other error by its class,
each with the template line, never the message (templates build it from the content);
so does a rendering over its budget (`curate.chat.budget`: the reason names the budget)
or one on which the template's code fails (the reason names the exception's type).

At the end of a pass, the local engine's idle workers help a busy one
(`curate.engines.help_desk`): a batch's conversations are then rendered and encoded in runs
of about `PIECE_CHARS` characters of content, which they may take (`help_with`). Each
conversation's outcome depends on it alone, so the rows, ids, masks and reasons are the
same whichever process computed which run.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from importlib import metadata
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from curate.chat.budget import BudgetExceeded, RenderRefused
from curate.chat.mask import NotPrefixStable, prefix_spans, unmarked_spans
from curate.chat.spec import MESSAGES
from curate.chat.template import (
    Renderer,
    TemplateRaised,
    TemplateText,
    find_template,
    special_tokens_map,
)
from curate.chat.tokens import (
    ChatTokenizer,
    Encoded,
    TiktokenOptions,
    Unmappable,
    load_chat_tokenizer,
    piece_encoder,
    re2_alternation,
    vocab_size,
)
from curate.errors import CurateError
from curate.io.batches import ID
from curate.output.chat_packing import ChatPackSpec
from curate.output.packing import NUM_TOKENS, TOKENS
from curate.reasons import NOT_PREFIX_STABLE, template_failure
from curate.stages import shared_work
from curate.stages.base import MapStage, StageContext, StageParams, StageResult, rejected_table
from curate.stages.tokenize import PIECE_CHARS, PackParams, id_type
from curate.stats import LOG2, UNIT, Stats
from curate.tokenizers.encoders import Encoder, library_versions
from curate.tokenizers.identity import file_digests
from curate.tokenizers.source import TokenizerSource, resolve_source

# what every template renders within its budget (see ChatTemplate._probe)
_PROBE = [{"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi."}]
LABELS = "labels"
LOSS_MASK = "loss_mask"
IGNORE = -100


class ChatTemplateParams(StageParams):
    source: str = Field(
        description="The model's tokenizer (tokenizer.json, a SentencePiece .model, a tekken "
        ".json or a .tiktoken file) or its folder, or a hub id in the local HF cache; relative "
        "to the recipe."
    )
    kind: Literal["auto", "tokenizer.json", "sentencepiece", "tekken", "tiktoken"] = Field(
        "auto", description="The tokenizer's family, when a folder holds several."
    )
    pattern: str | None = Field(
        None, description="tiktoken ranks only: split regex or preset (cl100k_base)."
    )
    special_tokens: dict[str, int] = Field(
        default_factory=dict,
        description="tiktoken ranks only: special tokens and their ids (the template's, such "
        "as <|eot_id|>, must be among them).",
    )
    threads: int | None = Field(
        None,
        ge=1,
        description="Encoder threads per worker; default: the worker's CPU share for a "
        "tokenizer.json, 1 for the others (tiktoken and sentencepiece on short pieces).",
    )
    template: str | None = Field(
        None,
        description="A .jinja file, a tokenizer_config.json or a folder holding one; default: "
        "the tokenizer's chat_template.jinja, then its tokenizer_config.json.",
    )
    template_name: str = Field("default", description="Which template, when a config has many.")
    mask: Literal["labels", "loss_mask"] = Field(
        "labels", description="labels: ids with -100 off the assistant; loss_mask: 0/1 column."
    )
    assistant: Literal["auto", "generation", "prefix"] = Field(
        "auto",
        description="How assistant tokens are found: the template's {% generation %} blocks, "
        "or by rendering prefixes; auto: generation blocks when the template has them.",
    )
    max_len: int | None = Field(None, ge=2, description="Longest conversation in tokens.")
    overlong: Literal["drop", "truncate"] = Field(
        "drop", description="What happens to a conversation longer than max_len."
    )
    special_text: Literal["keep", "remove"] = Field(
        "keep",
        description="Conversations whose contents hold a special-token string (<|im_end|>, "
        "</s>, ...): keep them, encoded as the reference does (control tokens with a "
        "tokenizer.json, as transformers; text with SentencePiece, tekken, tiktoken), or "
        "remove them (reason special_token_text_in_content), so no content can forge a "
        "turn boundary.",
    )
    keep_messages: bool = Field(False, description="Keep the messages column beside the ids.")
    now: str = Field(
        "2026-01-01", description="The date templates see through strftime_now (fixed)."
    )
    variables: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Extra template variables (e.g. date_string)."
    )
    pack: PackParams | None = Field(
        None,
        description="Pack whole conversations into ragged rows of at most seq_len tokens, with "
        "position_ids and cu_seqlens (curate.output.chat_packing); max_len defaults to seq_len.",
    )

    @model_validator(mode="after")
    def _pack_fits(self) -> ChatTemplateParams:
        """A packed row holds whole conversations, so none may be longer than a row: max_len
        (with `overlong`) is what drops or truncates the longer ones, and is counted."""
        if self.pack is not None:
            if self.max_len is None:
                object.__setattr__(self, "max_len", self.pack.seq_len)
            elif self.max_len > self.pack.seq_len:
                raise ValueError(
                    f"max_len {self.max_len} is longer than pack.seq_len {self.pack.seq_len}: "
                    "a packed row holds whole conversations"
                )
        return self


class ChatTemplate(MapStage[ChatTemplateParams]):
    """input_ids and an assistant-only loss from the model's own chat template."""

    name = "chat_template"
    Params = ChatTemplateParams
    reads = (MESSAGES,)

    def __init__(self, params: ChatTemplateParams, context: StageContext | None = None) -> None:
        super().__init__(params, context)
        self.base_dir = self.context.base_dir

    def columns_read(self) -> tuple[str, ...]:
        return (MESSAGES,)

    # -- what the template and tokenizer are (cheap) ------------------------------------

    @property
    def source(self) -> TokenizerSource:
        found: TokenizerSource | None = self.__dict__.get("_source")
        if found is None:
            found = resolve_source(self.params.source, self.base_dir, self.params.kind)
            self.__dict__["_source"] = found
        return found

    @property
    def options(self) -> TiktokenOptions:
        return TiktokenOptions(self.params.pattern, dict(self.params.special_tokens) or None)

    @property
    def template(self) -> TemplateText:
        found: TemplateText | None = self.__dict__.get("_template")
        if found is None:
            found = find_template(self.params.template, self.base_dir, self.source,
                                  self.params.template_name)  # fmt: skip
            self.__dict__["_template"] = found
        return found

    def _special_tokens(self, tok: ChatTokenizer | None = None) -> dict[str, Any]:
        """The template's `bos_token`, `eos_token`, ...: tokenizer_config.json's, else the
        format's own (from the loaded tokenizer when there is one: a tekken file is big)."""
        found: dict[str, Any] | None = self.__dict__.get("_special_tokens_map")
        if found is None:
            defaults = getattr(tok, "defaults", None)
            if defaults is None and self.source.kind != "tokenizer.json":
                defaults = self._format_encoder().defaults
            found = special_tokens_map(self.source, defaults)
            self.__dict__["_special_tokens_map"] = found
        return found

    def _format_encoder(self) -> Encoder:
        """The SentencePiece, tekken or tiktoken encoder without its tables (the driver's
        vocabulary size and BOS/EOS): built once, a tekken file is parsed in a fifth of a
        second."""
        found: Encoder | None = self.__dict__.get("_format_encoder_object")
        if found is None:
            found = piece_encoder(self.source, 1, self.options)
            self.__dict__["_format_encoder_object"] = found
        return found

    def uses_generation_tags(self) -> bool:
        if self.params.assistant == "auto":
            return self.template.has_generation_tags
        return self.params.assistant == "generation"

    def software(self) -> dict[str, str]:
        soft = {"jinja2": _version("jinja2"), **library_versions(self.source)}
        soft.update({f"tokenizer_sha256:{k}": v for k, v in file_digests(self.source).items()})
        soft["chat_template_sha256"] = self.template.sha256
        return soft

    def describe(self) -> dict[str, Any]:
        return {
            "chat_template": {
                "origin": self.template.origin,
                "sha256": self.template.sha256,
                "assistant_tokens": "generation blocks" if self.uses_generation_tags()
                else "prefix renderings",
                "tokenizer": str(self.source.main),
                "tokenizer_kind": self.source.kind,
                **({"pattern": self.params.pattern or ""}
                   if self.source.kind == "tiktoken" else {}),
                "special_tokens_passed": {
                    k: v if isinstance(v, str) else f"{len(v)} tokens"
                    for k, v in sorted(self._special_tokens().items())
                },
                "mask": self.params.mask,
                "max_len": self.params.max_len,
                "overlong": self.params.overlong,
            },
            **({"pack": {"seq_len": self.params.pack.seq_len, "kind": "conversations",
                         "where": "shard writer, per partition"}} if self.params.pack else {}),
        }  # fmt: skip

    # -- loaded once per worker ---------------------------------------------------------

    def setup(self) -> None:
        self._loaded()

    def _loaded(self) -> tuple[ChatTokenizer, Renderer, str]:
        found = self.__dict__.get("_loaded_objects")
        if found is None:
            threads = self.params.threads or self._default_threads()
            tok = load_chat_tokenizer(self.source, threads, self.options)
            variables = {**self._special_tokens(tok), **self.params.variables}
            now = datetime.fromisoformat(self.params.now)
            renderer = Renderer(self.template, now, variables)
            self._probe(renderer)
            found = (tok, renderer, re2_alternation(tok.specials))
            self.__dict__["_loaded_objects"] = found
        return found

    def _probe(self, renderer: Renderer) -> None:
        """A template over budget on a two-message conversation would be over budget on
        every record: a hostile or broken template fails the run, rather than remove
        everything one record at a time."""
        try:
            renderer.render(_PROBE)
            renderer.render(_PROBE[:1], True)
        except BudgetExceeded as exc:
            raise CurateError(
                f"chat template {self.template.origin}: over its budget "
                f"({exc.which}) on a two-message conversation; every record would be; see "
                "curate.chat.budget for the limits"
            ) from None
        except CurateError:  # a rendering past the clock: the run fails as it would later
            raise
        except Exception:  # a template may refuse this conversation (raise_exception)
            pass

    def _default_threads(self) -> int:
        """tokenizers' batch call gains from the worker's cores; tiktoken's thread pool costs
        more than it gives on a batch's many short pieces (1.6x the CPU, slower, measured on
        the chat_template benchmark's corpus), and workers already use every core."""
        return max(1, pa.cpu_count()) if self.source.kind == "tokenizer.json" else 1

    def id_type(self) -> pa.DataType:
        """From the vocabulary size alone: the driver plans with it and never encodes."""
        size: int | None = self.__dict__.get("_vocab_size")
        if size is None:
            loaded = self.__dict__.get("_loaded_objects")
            if loaded:
                size = loaded[0].vocab_size
            elif self.source.kind == "tokenizer.json":
                size = vocab_size(self.source)
            else:
                size = self._format_encoder().vocab_size
            self.__dict__["_vocab_size"] = size
        return id_type(size)

    def pack_spec(self) -> ChatPackSpec | None:
        if self.params.pack is None:
            return None
        return ChatPackSpec(self.params.pack.seq_len, self.id_type(), self.params.mask)

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        spec = self.pack_spec()
        if spec is not None:
            return spec.output_schema()
        if not self.params.keep_messages and MESSAGES in schema.names:
            schema = schema.remove(schema.get_field_index(MESSAGES))
        schema = schema.append(pa.field(TOKENS, pa.list_(self.id_type())))
        if self.params.mask == "labels":
            schema = schema.append(pa.field(LABELS, pa.list_(pa.int32())))
        else:
            schema = schema.append(pa.field(LOSS_MASK, pa.list_(pa.uint8())))
        return schema.append(pa.field(NUM_TOKENS, pa.int32()))

    # -- the work ---------------------------------------------------------------------

    def render(self, messages: list[dict[str, str]]) -> tuple[str, list[tuple[int, int]]]:
        """The conversation's text as transformers renders it, and its assistant character
        spans (raises on failure)."""
        tok = self._loaded()[0]
        text, spans = self._render(messages, marked=False)
        return tok.clean(text), spans

    def _render(
        self, messages: list[dict[str, str]], marked: bool
    ) -> tuple[str, list[tuple[int, int]]]:
        """The text to encode (contents' special strings in markers when `marked`), and the
        assistant spans in the text without markers."""
        tok, renderer, _ = self._loaded()
        if marked:
            messages = [{**m, "content": tok.mark(m["content"])} for m in messages]
        text, spans = renderer.render(messages, False)
        if not self.uses_generation_tags():
            specials = list(tok.specials)
            spans = prefix_spans(messages, text, lambda m, g: renderer.render(m, g)[0], specials)
        if marked:
            spans = unmarked_spans(text, spans)
        return text, spans

    def process(self, batch: pa.RecordBatch) -> StageResult:
        """Without the cyclic garbage collector: a batch makes hundreds of thousands of
        short-lived containers (message dicts, token lists), which trigger collections that
        scan every live object and find nothing (a tenth of the stage's time, measured on
        the chat_template benchmark). What cycles a batch makes (a template's exceptions)
        are collected after it."""
        with _no_gc():
            return self._process(batch)

    def _process(self, batch: pa.RecordBatch) -> StageResult:
        _, _, specials = self._loaded()
        column = batch.column(MESSAGES)
        has_special = _contents_matching(column, specials)
        outcomes = self._every_outcome(column, has_special)
        ids_out, masks_out, kept = [], [], []
        removed_rows: list[int] = []
        reasons: list[str] = []
        truncated = 0
        for row, encoded in enumerate(outcomes):
            if isinstance(encoded, str):  # not rendered, or unmappable: why
                removed_rows.append(row)
                reasons.append(encoded)
                continue
            ids, mask = encoded.ids, encoded.mask
            if self.params.max_len is not None and len(ids) > self.params.max_len:
                if self.params.overlong == "drop":
                    removed_rows.append(row)
                    reasons.append("too_long")
                    continue
                ids, mask = ids[: self.params.max_len], mask[: self.params.max_len]
                truncated += 1
            if not mask.any():
                removed_rows.append(row)
                reasons.append("no_assistant_tokens")
                continue
            ids_out.append(ids)
            masks_out.append(mask)
            kept.append(row)
        out = self._columns(batch, kept, ids_out, masks_out)
        removed = None
        if removed_rows:  # in row order
            gone = batch.column(ID).take(pa.array(np.asarray(removed_rows)))
            removed = rejected_table(self.name, gone, reasons)
        counters = {
            "truncated": truncated,
            "content_has_special_token_text": int(has_special.sum()),
        }
        stats = _statistics(column, kept, ids_out, masks_out) if self.context.stats else None
        counters = {k: v for k, v in counters.items() if v}
        return StageResult(out, removed=removed, counters=counters, stats=stats)

    def _every_outcome(self, column: pa.Array, has_special: np.ndarray) -> list[Encoded | str]:
        """Each conversation's ids and mask, or why it is removed; where the engine shares a
        stage's items, computed in runs of conversations an idle worker may take. The
        contents are Python strings only in here (and in the runs' copies a helper gets)."""
        conversations = column.to_pylist()
        sizes = _content_chars(column) if shared_work.sharing() else np.empty(0)
        cuts = shared_work.runs(sizes.tolist(), PIECE_CHARS)
        if len(cuts) < 2:
            return self._outcomes(conversations, has_special)
        runs = [(conversations[a:b], has_special[a:b], int(sizes[a:b].sum())) for a, b in cuts]
        return [o for run in shared_work.each(self, runs, self.help_with, _size) for o in run]

    def help_with(self, run: tuple[list[Any], np.ndarray, int]) -> list[Encoded | str]:
        """A run of a batch's conversations rendered and encoded
        (`curate.stages.shared_work`): each one's ids and mask, or why it is removed. Any
        worker that has set this stage up renders with the same template and tokenizer, so
        it gives the same outcome."""
        conversations, has_special, _ = run
        with _no_gc():
            return self._outcomes(conversations, has_special)

    def _outcomes(self, conversations: list[Any], has_special: np.ndarray) -> list[Encoded | str]:
        """Each conversation's ids and mask, or why it is removed, in order."""
        texts, spans, rows, outcomes = self._rendered(conversations, has_special)
        encodings = self._loaded()[0].encode(texts, spans)
        del texts
        for row, encoded in zip(rows, encodings, strict=True):
            outcomes[row] = str(encoded) if isinstance(encoded, Unmappable) else encoded
        return outcomes  # type: ignore[return-value]  # every None is filled now

    def _rendered(
        self, conversations: list[Any], has_special: np.ndarray
    ) -> tuple[list[str], list[list[tuple[int, int]]], list[int], list[Encoded | str | None]]:
        """Each conversation's text and assistant spans, or why it is removed: the texts,
        spans and rows rendered, and an outcome per conversation holding the reason of each
        one removed (None for the others)."""
        import jinja2

        tok = self._loaded()[0]
        texts: list[str] = []
        spans: list[list[tuple[int, int]]] = []
        rows: list[int] = []
        outcomes: list[Encoded | str | None] = [None] * len(conversations)
        remove_special = self.params.special_text == "remove"
        for row, messages in enumerate(conversations):
            if remove_special and has_special[row]:
                outcomes[row] = "special_token_text_in_content"
                continue
            try:
                marked = tok.marks_content and bool(has_special[row])
                text, found = self._render(messages, marked=marked)
            except RenderRefused as exc:  # over budget, or the template's code failed
                outcomes[row] = exc.reason
                continue
            except (TemplateRaised, jinja2.exceptions.TemplateError) as exc:
                outcomes[row] = template_failure(exc, raised=isinstance(exc, TemplateRaised))
                continue
            except NotPrefixStable as exc:
                outcomes[row] = NOT_PREFIX_STABLE(i=exc.message_index)
                continue
            texts.append(text)
            spans.append(found)
            rows.append(row)
        return texts, spans, rows, outcomes

    def _columns(
        self, batch: pa.RecordBatch, kept: list[int], ids: list[np.ndarray],
        masks: list[np.ndarray],
    ) -> pa.RecordBatch:  # fmt: skip
        batch = batch.take(pa.array(kept, pa.int64()))
        if not self.params.keep_messages:
            batch = batch.drop_columns([MESSAGES])
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        offsets = np.zeros(len(ids) + 1, np.int32)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.concatenate(ids) if ids else np.empty(0, np.int64)
        flat_mask = np.concatenate(masks) if masks else np.empty(0, np.uint8)
        id_t = self.id_type()
        values = pa.array(flat.astype(id_t.to_pandas_dtype()), id_t)
        batch = batch.append_column(
            pa.field(TOKENS, pa.list_(id_t)), pa.ListArray.from_arrays(pa.array(offsets), values)
        )
        if self.params.mask == "labels":
            labels = flat.astype(np.int32)
            labels[flat_mask == 0] = IGNORE
            column, name = pa.ListArray.from_arrays(pa.array(offsets), pa.array(labels)), LABELS
        else:
            column = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat_mask, pa.uint8()))
            name = LOSS_MASK
        batch = batch.append_column(pa.field(name, column.type), column)
        return batch.append_column(NUM_TOKENS, pa.array(lengths.astype(np.int32)))


@contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _content_chars(column: pa.Array) -> np.ndarray:
    """Each conversation's characters of content (what rendering and encoding it costs)."""
    chars = pc.utf8_length(pc.struct_field(column.flatten(), "content")).to_numpy(
        zero_copy_only=False
    )
    parents = pc.list_parent_indices(column).to_numpy()
    return np.bincount(parents, weights=np.nan_to_num(chars), minlength=len(column))


def _size(run: tuple[list[Any], np.ndarray, int]) -> int:
    return run[2]


def _contents_matching(column: pa.Array, pattern: str) -> np.ndarray:
    """Which conversations hold a special-token string in some message's content: one RE2
    scan of the batch's contents (`pattern` from `re2_alternation`; empty: none can)."""
    if not pattern or len(column) == 0:
        return np.zeros(len(column), bool)
    contents = pc.struct_field(column.flatten(), "content")
    hit = pc.match_substring_regex(contents, pattern).to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(column).to_numpy()
    return np.bincount(parents[hit], minlength=len(column)) > 0


def _version(lib: str) -> str:
    try:
        return metadata.version(lib)
    except metadata.PackageNotFoundError:
        return "not installed"


def _statistics(
    column: pa.Array, kept: list[int], ids: list[Any], masks: list[np.ndarray]
) -> Stats:
    """The conversations written: messages per conversation (`turns`), messages per role
    (`messages/<role>`), tokens that carry the loss (the assistant's: `tokens/loss`) and the
    rest (template, system, user, tool: `tokens/other`), and per conversation the share of
    its tokens that carry the loss (`loss_share`)."""
    stats = Stats()
    chosen = column.take(pa.array(kept, pa.int64())) if len(kept) else column.slice(0, 0)
    stats.histogram("turns", pc.list_value_length(chosen).to_numpy(zero_copy_only=False)
                    .astype(np.int64), LOG2, "messages")  # fmt: skip
    roles = pc.value_counts(pc.struct_field(pc.list_flatten(chosen), "role"))
    for item in roles.to_pylist():
        stats.count(f"messages/{item['values']}", item["counts"])
    total = np.array([len(i) for i in ids], dtype=np.int64)
    loss = np.array([int(np.count_nonzero(m)) for m in masks], dtype=np.int64)
    stats.count("tokens/loss", int(loss.sum()))
    stats.count("tokens/other", int((total - loss).sum()))
    with np.errstate(invalid="ignore", divide="ignore"):
        stats.histogram("loss_share", loss / np.maximum(total, 1), UNIT, "share")
    return stats
