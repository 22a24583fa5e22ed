"""Finding personal data with Presidio and redacting, masking, hashing it or dropping documents.

Defaults are what a pre-training team usually wants: the pattern and checksum
recognizers for values that identify a person or an account (e-mail, phone, card,
IBAN, IP, US SSN, crypto wallet), each replaced by a type tag such as `<EMAIL_ADDRESS>`.
URLs and dates are left alone: in a web or documentation corpus they are rarely
personal and redacting them damages the text (links, changelogs, citations). Names and
places need NER: name an installed or saved spaCy pipeline in `spacy_model` and add
PERSON, LOCATION, ... to `entities`. The default score threshold 0.4 keeps Presidio's
phone matches (scored 0.4) and checksum-validated values, and drops the very weak SSN
forms (scored 0.05: any nine digits).

Nothing detected ever leaves the stage except as a replacement: the manifest gets counts
per entity type and action, rejected/ gets ids and `pii:<TYPE>` reasons, and Presidio's
log records are dropped while documents are analysed (`curate.pii.quiet`).

On chat records each message of the chosen `roles` (default: all) is analysed and
replaced on its own, exactly as a document would be; `drop_document` counts a type's
values over the whole conversation and drops the conversation. Counters then count
messages (`messages/analyzed`, `skipped`, `changed`) and conversations
(`documents/changed`, `documents/dropped`).
"""

from __future__ import annotations

import functools
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from curate.chat.contents import Roles, put_back, roles_field
from curate.errors import CurateError
from curate.io.batches import ID, PII_FOUND
from curate.reasons import PII
from curate.stages.base import MapStage, StageParams, StageResult, rejected_table
from curate.stages.shared_work import each
from curate.stats import LOG2, Stats

Action = Literal["redact", "mask", "hash", "drop_document"]
ValueAction = Literal["redact", "mask", "hash"]


class EntityRule(StageParams):
    action: Action = Field("redact", description="What to do with values of this type.")
    above: int = Field(
        0, ge=0, description="drop_document: drop documents with more than this many values."
    )
    otherwise: ValueAction = Field(
        "redact", description="drop_document: what to do with the values of documents kept."
    )


DEFAULT_ENTITIES: dict[str, Action | EntityRule] = {
    "EMAIL_ADDRESS": "redact",
    "PHONE_NUMBER": "redact",
    "CREDIT_CARD": "redact",
    "IBAN_CODE": "redact",
    "IP_ADDRESS": "redact",
    "US_SSN": "redact",
    "CRYPTO": "redact",
}


class PiiParams(StageParams):
    entities: dict[str, Action | EntityRule] = Field(
        default_factory=lambda: dict(DEFAULT_ENTITIES),
        description="Presidio entity types to find, each with an action: redact (type tag), "
        "mask, hash (keyed), drop_document (or {action: drop_document, above: N}).",
    )
    languages: list[str] = Field(["en"], min_length=1, description="Presidio languages.")
    score_threshold: float = Field(
        0.4, ge=0, le=1, description="Minimum Presidio score of a value to act on."
    )
    allow_list: list[str] = Field([], description="Values never acted on (your own addresses).")
    allow_list_match: Literal["exact", "regex"] = Field(
        "exact", description="Allow-list entries are exact values, or regular expressions."
    )
    spacy_model: str | None = Field(
        None,
        description="Installed spaCy package or saved pipeline folder (relative to the recipe) "
        "for NER entities; never downloaded. Default: no NLP model.",
    )
    mask_char: str = Field("*", min_length=1, max_length=1, description="mask: the character.")
    hash_key_env: str = Field(
        "CURATE_PII_KEY", description="hash: environment variable holding the key."
    )
    hash_key_file: str | None = Field(
        None,
        description="hash: file holding the key (relative to the recipe); wins over the variable.",
    )
    hash_digits: int = Field(16, ge=8, le=64, description="hash: hex digits in each token.")
    roles: Roles | None = roles_field()

    @model_validator(mode="after")
    def _entities(self) -> PiiParams:
        if not self.entities:
            raise ValueError("entities: name at least one entity type")
        return self

    def rules(self) -> dict[str, EntityRule]:
        return {
            name: rule if isinstance(rule, EntityRule) else EntityRule(action=rule)
            for name, rule in self.entities.items()
        }


def _message_numbers(batch: pa.RecordBatch, u: Any) -> list[int] | None:
    """For conversations: each analysed unit's message number within its conversation."""
    if not u.chat or u.positions is None:
        return None
    from curate.chat.spec import MESSAGES

    offsets = np.asarray(batch.column(MESSAGES).offsets, np.int64)
    starts = offsets - offsets[0]
    return [int(p - starts[r]) for p, r in zip(u.positions.tolist(), u.rows.tolist(), strict=True)]


def _with_found(
    batch: pa.RecordBatch,
    found_in: dict[int, list[tuple[int, list[Any]]]],
    messages: list[int] | None,
) -> pa.RecordBatch:
    """The batch with `_pii` naming, per document, each entity type found and its character
    span (`TYPE start-end`; in a conversation's message k, `m<k>:TYPE start-end`), after
    what an earlier pii stage put there. Never the value."""
    at = batch.schema.get_field_index(PII_FOUND)
    items: list[str | None] = batch.column(at).to_pylist()
    for row, hits in found_in.items():
        found = [
            f"{'' if messages is None else f'm{messages[k]}:'}{s.entity} {s.start}-{s.end}"
            for k, spans in hits
            for s in spans
        ]
        before = items[row]
        items[row] = ";".join(([before] if before else []) + found)
    return batch.set_column(at, batch.schema.field(at), pa.array(items, pa.string()))


@functools.cache
def _version(package: str) -> str:
    """An installed distribution's version, read once a process: a run asks for the same
    four several times (the manifest, the stage cache's keys, the examples), and each read
    parses the distribution's metadata (about 1 ms)."""
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


class Pii(MapStage[PiiParams]):
    """Finds personal data with Presidio (offline) and redacts, masks, hashes or drops it."""

    name = "pii"
    Params = PiiParams
    reads = ("text",)
    shapes = ("text", "chat")

    def _hashes(self) -> bool:
        return any(
            r.action == "hash" or (r.action == "drop_document" and r.otherwise == "hash")
            for r in self.params.rules().values()
        )

    def _key(self) -> bytes:
        from curate.pii.keys import load_key

        return load_key(self.params.hash_key_env, self.params.hash_key_file, self.context.base_dir)

    def software(self) -> dict[str, str]:
        soft = {
            name: _version(name)
            for name in ("presidio-analyzer", "phonenumbers", "tldextract", "regex")
        }
        if self.params.spacy_model is not None:
            soft["spacy"] = _version("spacy")
        if self._hashes():
            from curate.pii.keys import key_identity

            soft["pii_key_id"] = key_identity(self._key())  # the key's identity, not the key
        return soft

    def describe(self) -> dict[str, Any]:
        return {
            "nlp_engine": "no_op" if self.params.spacy_model is None else "spacy",
            "actions": {name: rule.action for name, rule in sorted(self.params.rules().items())},
        }

    @property
    def setup_shared_by_fork(self) -> bool:
        """Presidio with the no-op NLP engine starts no thread, so the local engine's forked
        workers can inherit one analyzer built in the driver (`fork_setup.set_up_before_fork`).
        A spaCy pipeline may start native threads (numpy's BLAS): each worker builds its own."""
        return self.params.spacy_model is None

    def setup(self) -> None:
        from curate.pii.analyzer import Analysis, AnalyzerConfig, resolve_spacy_model

        p = self.params
        model = (
            resolve_spacy_model(p.spacy_model, self.context.base_dir)
            if p.spacy_model is not None
            else None
        )
        self._analysis = Analysis(
            AnalyzerConfig(
                languages=tuple(p.languages),
                entities=tuple(p.entities),
                score_threshold=p.score_threshold,
                allow_list=tuple(p.allow_list),
                allow_list_match=p.allow_list_match,
                spacy_model=model,
            )
        )
        self._rules = p.rules()
        self._secret = self._key() if self._hashes() else b""

    def learnt(self) -> Any:
        analysis = getattr(self, "_analysis", None)
        return analysis.learnt() if analysis is not None else None

    def learn(self, learnt: Any) -> None:
        analysis = getattr(self, "_analysis", None)
        if analysis is not None and isinstance(learnt, dict):
            analysis.learn(learnt)

    def _replacement(self, entity: str, value: str) -> str:
        from curate.pii.keys import token

        rule = self._rules[entity]
        action = rule.otherwise if rule.action == "drop_document" else rule.action
        if action == "redact":
            return f"<{entity}>"
        if action == "mask":
            return self.params.mask_char * len(value)
        return token(self._secret, entity, value, self.params.hash_digits)

    def _set_up(self) -> None:
        """`setup()` once, for a stage used without an engine's `tasks.ready` (examples in
        the driver, tests)."""
        if not hasattr(self, "_analysis"):
            self.setup()

    def shown(self, texts: list[str | None]) -> list[str | None]:
        """The texts with every value this stage would act on replaced by its type tag,
        whatever the action (drop_document, mask and hash included): how examples show the
        text of documents that never reached this stage (`curate.examples.privacy`)."""
        from curate.pii.spans import final_spans, replace

        self._set_up()
        out: list[str | None] = []
        for text in texts:
            found = self._analysis.analyze(text)[0] if text else None
            if text and found:
                text = replace(text, final_spans(text, found), lambda s, _: f"<{s.entity}>")
            out.append(text)
        return out

    def help_with(self, text: str | None) -> tuple[list[Any], bool, int] | str | None:
        """One document's analysis (`curate.stages.shared_work`): its spans, whether the
        analyzer ran, and the Presidio log records dropped meanwhile; the type of the
        failure when analysing it failed; None for no text."""
        from curate.pii import quiet

        if not text:
            return None
        self._set_up()
        before = quiet.dropped()
        try:
            found, ran = self._analysis.analyze(text)
        except Exception as exc:
            return type(exc).__name__
        return found, ran, quiet.dropped() - before

    def process(self, batch: pa.RecordBatch) -> StageResult:
        from curate.pii.spans import final_spans, replace

        self._set_up()
        u = self.text_units(batch)  # documents, or the chosen messages of conversations
        texts: list[str | None] = u.texts.to_pylist()
        rows = u.rows.tolist()
        unit = "messages" if u.chat else "documents"
        counters: Counter[str] = Counter()
        found_in: dict[int, list[tuple[int, list[Any]]]] = {}  # row -> [(unit, spans)]
        suppressed = 0
        for k, analysed in enumerate(each(self, texts, self.help_with, _length)):
            if analysed is None:
                continue
            if isinstance(analysed, str):  # never echo the text: the type of failure and the row
                raise CurateError(
                    f"pii: analysing document {batch.column(ID)[rows[k]].as_py()!r} failed "
                    f"({analysed})"
                ) from None
            found, ran, dropped = analysed
            suppressed += dropped
            counters[f"{unit}/analyzed" if ran else f"{unit}/skipped"] += 1
            if found:
                found_in.setdefault(rows[k], []).append((k, final_spans(texts[k] or "", found)))
        out = list(texts)
        keep = [True] * batch.num_rows
        reasons: list[str] = []
        changed_units = changed = 0
        for row, hits in found_in.items():  # rows in order: units come in row order
            per_type = Counter(s.entity for _, spans in hits for s in spans)
            drop = sorted(
                e
                for e, n in per_type.items()
                if self._rules[e].action == "drop_document" and n > self._rules[e].above
            )
            if drop:
                keep[row] = False
                reasons.append(PII(code=drop[0]))
                counters["documents/dropped"] += 1
                for e, n in per_type.items():
                    counters[f"values/{e}/drop_document"] += n
                continue
            for e, n in per_type.items():
                rule = self._rules[e]
                action = rule.otherwise if rule.action == "drop_document" else rule.action
                counters[f"values/{e}/{action}"] += n
            row_changed = False
            for k, spans in hits:
                text = texts[k] or ""
                new = replace(text, spans, lambda s, value: self._replacement(s.entity, value))
                if new != text:
                    out[k] = new
                    changed_units += 1
                    row_changed = True
            changed += row_changed
        counters["documents/changed"] += changed
        if u.chat:
            counters["messages/changed"] += changed_units
        if suppressed:
            counters["log_records_suppressed"] += suppressed
        result = batch
        if changed:
            result = put_back(batch, self.text_field, u, pa.array(out, pa.string()))
        if found_in and PII_FOUND in result.schema.names:  # lineage: types and places only
            result = _with_found(result, found_in, _message_numbers(batch, u))
        removed = None
        if not all(keep):
            mask = pa.array(keep)
            ids = pc.filter(batch.column(ID), pc.invert(mask))
            removed = rejected_table(self.name, ids, reasons)
            result = result.filter(mask)
        stats = None
        if self.context.stats:  # counts only: how many values of each type met each action
            kept = {k: v for k, v in counters.items() if k != "log_records_suppressed"}
            stats = Stats(sums=Counter(kept))
            per_row = np.zeros(batch.num_rows, dtype=np.int64)
            for row, hits in found_in.items():
                per_row[row] = sum(len(spans) for _, spans in hits)
            stats.histogram("values_per_document", per_row, LOG2, "values")
        examples = None
        if self.context.examples and found_in:
            examples = self._examples(batch, texts, rows, found_in, keep)
        return StageResult(
            result, changed=changed, removed=removed, counters=dict(counters), stats=stats,
            examples=examples,
        )  # fmt: skip

    def _examples(
        self,
        batch: pa.RecordBatch,
        texts: list[str | None],
        rows: list[int],
        found_in: dict[int, list[tuple[int, list[Any]]]],
        keep: list[bool],
    ) -> pa.Table | None:
        """Documents changed (not dropped), offered as examples per entity type found
        (`changed:<TYPE>`): the text with every value found shown as its type tag,
        whatever the action, from just before the first value of that type."""
        from curate.pii.spans import replace
        from curate.stages.examples import around, offer

        ids = batch.column(ID).to_pylist()
        found = [
            (ids[row], f"changed:{e}")
            for row, hits in found_in.items()
            if keep[row]
            for e in sorted({s.entity for _, spans in hits for s in spans})
        ]
        row_of = {ids[row]: row for row in found_in}

        def shown(doc: str, reason: str) -> tuple[str, int]:
            row = row_of[doc]
            hits = dict(found_in[row])
            units = [k for k, r in enumerate(rows) if r == row]
            parts = [
                replace(texts[k] or "", hits[k], lambda s, _: f"<{s.entity}>")
                if k in hits else texts[k] or ""
                for k in units
            ]  # fmt: skip
            whole = sum(len(texts[k] or "") for k in units)
            return around("\n\n".join(parts), f"<{reason.removeprefix('changed:')}>"), whole

        return offer(self, found, shown, self.context.examples)


def _length(text: str | None) -> int:
    return len(text) if text else 0
