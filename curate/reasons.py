"""The fixed vocabulary of reasons a record is quarantined or a document removed for.

Reasons go where document text must never go: `rejected/` and `quarantine/`, the
manifest's counters, the summary a run prints, the one-line error of `on_error: fail`.
So every reason curate writes is one of the templates below, and a template's slots
take only what is not content: a field name or benchmark name from the recipe, a type, a
role or key from a fixed set, a position, a count, a byte offset, a parser's fixed
message, a language code or entity type a model emits. A value a record holds (a role
name, a key, a chat template's `raise_exception` message, which templates build from the
conversation) never enters a reason; the file and line in `quarantine/` say where to look.

`known(reason)` says whether a string is in the vocabulary: the tests feed every kind of
bad record and every removing stage through runs and check each reason they wrote.
User stages (named by dotted path) give their own reasons, which are theirs to keep clean.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME = r"[A-Za-z0-9_.\-]+"

JSON_MESSAGES = frozenset(
    {
        "Expecting value",
        "Expecting property name enclosed in double quotes",
        "Expecting ':' delimiter",
        "Expecting ',' delimiter",
        "Extra data",
        "Unexpected UTF-8 BOM (decode using utf-8-sig)",
        "Unterminated string starting at",
        "Invalid control character at",
        "Invalid \\escape",
        "Invalid \\uXXXX escape",
        "Illegal trailing comma before end of object",
        "Illegal trailing comma before end of array",
    }
)
"""What CPython's JSON decoder says (its C scanner's fixed messages); anything else it
says (the pure-Python scanner quotes the offending character) is not repeated."""

ARROW_MESSAGES = frozenset(
    {
        "The document is empty.",
        "The document root must not be followed by other values.",
        "Invalid value.",
        "Missing a name for object member.",
        "Missing a colon after a name of object member.",
        "Missing a comma or '}' after an object member.",
        "Missing a comma or ']' after an array element.",
        "Incorrect hex digit after \\u escape in string.",
        "The surrogate pair in string is invalid.",
        "Invalid escape character in string.",
        "Missing a closing quotation mark in string.",
        "Invalid encoding in string.",
        "Number too big to be stored in double.",
        "Miss fraction part in number.",
        "Miss exponent in number.",
        "a field was specified twice",
    }
)
"""Arrow's JSON reader's (RapidJSON's) fixed messages, with the column path it names
(`Column(/key)`: a record's keys) replaced by "a field"."""

KEYS = frozenset(
    {"role", "content", "from", "value", "system", "instruction", "input", "output",
     "tool_calls", "function_call", "tool_call_id", "reasoning_content", "thinking", "weight"}
)  # fmt: skip
ROLES = frozenset({"system", "user", "assistant", "tool"})
BUDGETS = frozenset(
    {"steps", "string_size", "sequence_size", "output_size", "integer_size", "nesting_depth",
     "range", "call_depth"}
)  # fmt: skip
"""The rendering budgets of `curate.chat.budget`."""

_SLOTS: dict[str, tuple[str, Any]] = {
    # slot: (regular expression of its rendering, what a value must be)
    "field": (r"'.*'|\".*\"", str),  # a name from the recipe, shown with repr
    "benchmark": (r".+", str),  # a benchmark's name from the recipe
    "type": (r"[a-z0-9<>:_ ]+", re.compile(r"[a-z0-9<>:_ ]+")),  # an Arrow type name
    "kind": (rf"(?:an? )?{_IDENT}", re.compile(rf"(?:an? )?{_IDENT}")),  # a JSON/Python type
    "key": (r"'[a-z_]+'", KEYS),
    "role": ("|".join(sorted(ROLES)), ROLES),
    "codec": ("gzip|zstd", frozenset({"gzip", "zstd"})),
    "json": ("|".join(map(re.escape, sorted(JSON_MESSAGES))), JSON_MESSAGES),
    "arrow": ("|".join(map(re.escape, sorted(ARROW_MESSAGES))), ARROW_MESSAGES),
    "change": (r"[a-z]+ to [a-z]+", re.compile(r"[a-z]+ to [a-z]+")),
    "error": (_IDENT, re.compile(_IDENT)),  # an exception's class name
    "rule": (rf"{_IDENT}:{_IDENT}", re.compile(rf"{_IDENT}:{_IDENT}")),
    "code": (_NAME, re.compile(_NAME)),  # a language code or PII entity type a model emits
    "stage": (_NAME, re.compile(_NAME)),
    "budget": ("|".join(sorted(BUDGETS)), BUDGETS),
    "limit": (r"\d{1,3}(?:,\d{3})*", int),  # a bound from the recipe, shown as {limit:,}
    # a URL list's name from the recipe, and a UT1 category (a folder name) after a slash
    "list": (rf"{_NAME}(?:/{_NAME})?", re.compile(rf"{_NAME}(?:/{_NAME})?")),
}
_INT = r"\d+"


@dataclass(frozen=True)
class Reason:
    """One reason: a stable code, and its wording with named slots (`{field!r}`, `{line}`)."""

    code: str
    wording: str
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = []
        for literal, name, _, _ in string.Formatter().parse(self.wording):
            parts.append(re.escape(literal))
            if name is not None:
                parts.append(f"(?:{_SLOTS[name][0] if name in _SLOTS else _INT})")
        object.__setattr__(self, "_pattern", re.compile("".join(parts)))

    @property
    def slots(self) -> tuple[str, ...]:
        return tuple(n for _, n, _, _ in string.Formatter().parse(self.wording) if n)

    def __call__(self, **values: Any) -> str:
        """The reason's text; a slot given what it may not hold is a bug, raised at once."""
        for name, value in values.items():
            allowed = _SLOTS[name][1] if name in _SLOTS else int
            ok = (
                isinstance(value, allowed) and not isinstance(value, bool)
                if isinstance(allowed, type)
                else value in allowed
                if isinstance(allowed, frozenset)
                else isinstance(value, str) and allowed.fullmatch(value) is not None
            )
            if not ok:
                raise ValueError(f"reason {self.code}: {name}={value!r} is not allowed")
        return self.wording.format(**values)

    def matches(self, text: str) -> bool:
        return self._pattern.fullmatch(text) is not None


VOCABULARY: dict[str, Reason] = {}


def _reason(code: str, wording: str | None = None) -> Reason:
    reason = Reason(code, wording if wording is not None else code)
    assert code not in VOCABULARY, code
    VOCABULARY[code] = reason
    return reason


# quarantine: records a reader cannot take
INVALID_UTF8_LINE = _reason("invalid_utf8_line", "invalid UTF-8 at byte {byte} of the line")
INVALID_UTF8_FILE = _reason("invalid_utf8_file", "invalid UTF-8 at byte {byte} of the file")
MALFORMED_JSON = _reason("malformed_json", "malformed JSON at column {column}: {json}")
MALFORMED_JSON_AT = _reason("malformed_json_at", "malformed JSON: {json} column {column}")
MALFORMED_JSON_OTHER = _reason("malformed_json_other", "malformed JSON at column {column}")
NESTED_TOO_DEEPLY = _reason("nested_too_deeply", "malformed JSON: nested too deeply")
NOT_AN_OBJECT = _reason("not_an_object", "line is a JSON {kind}, not an object")
NOT_A_JSON_OBJECT = _reason("not_a_json_object", "line is not a JSON object")
MISSING_TEXT_FIELD = _reason("missing_text_field", "missing text field {field!r}")
TEXT_FIELD_TYPE = _reason("text_field_type", "text field {field!r} is {kind}, not a string")
TEXT_FIELD_NULL = _reason("text_field_null", "text field {field!r} is null")
TEXT_FIELD_UTF8 = _reason("text_field_utf8", "text field {field!r} is not valid UTF-8")
MISSING_ID_FIELD = _reason("missing_id_field", "missing id field {field!r}")
ID_FIELD_TYPE = _reason("id_field_type", "id field {field!r} is {kind}, not a string or integer")
ID_FIELD_MISSING_OR_TYPE = _reason(
    "id_field_missing_or_type", "id field {field!r} is missing or not a string or integer"
)
ID_FIELD_NULL = _reason("id_field_null", "id field {field!r} is null")
ID_FIELD_UTF8 = _reason("id_field_utf8", "id field {field!r} is not valid UTF-8")
ID_FIELD_SURROGATE = _reason(
    "id_field_surrogate", "id field {field!r} holds a lone surrogate (\\ud800-\\udfff)"
)
FIELD_TYPE = _reason("field_type", "field {field!r} is {kind}, not {type}")
FIELD_CAST = _reason("field_cast", "field {field!r} cannot be read as {type}")
FIELD_UTF8 = _reason("field_utf8", "field {field!r} is not valid UTF-8")
ARROW_REJECTS = _reason("arrow_rejects", "JSON the Arrow reader rejects: {arrow}")
ARROW_FIELD_CHANGED = _reason(
    "arrow_field_changed", "JSON the Arrow reader rejects: a field changed from {change}"
)
ARROW_ROWS = _reason("arrow_rows", "the Arrow reader reads the line as {n} records (a bare CR?)")
ARROW_OTHER = _reason("arrow_other", "the Arrow reader rejects the line")
DOCUMENT_TOO_LARGE = _reason(
    "document_too_large", "document_too_large: over max_document_bytes ({limit:,} bytes)"
)
CSV_COLUMNS = _reason("csv_columns", "row has {actual} cells, not the header's {expected}")
CSV_ROW_TOO_LONG = _reason(
    "csv_row_too_long",
    "a row longer than {limit:,} bytes; the rest of the file was not read",
)
EMPTY_RECORD = _reason("empty_record", "malformed JSON array: an empty record (a comma too many)")
LINE_BREAK_IN_STRING = _reason(
    "line_break_in_string", "malformed JSON: a line break inside a string"
)
TRUNCATED_RECORD = _reason(
    "truncated_record", "truncated JSON array: the file ends inside this record"
)
TRUNCATED_ARRAY = _reason(
    "truncated_array", "truncated JSON array: the file ends before its closing ]"
)
CONTENT_AFTER_ARRAY = _reason("content_after_array", "content after the JSON array's closing ]")
NOT_AN_OBJECT_RECORD = _reason("not_an_object_record", "record is a JSON {kind}, not an object")
NOT_A_JSON_OBJECT_RECORD = _reason("not_a_json_object_record", "record is not a JSON object")
INVALID_UTF8_RECORD = _reason("invalid_utf8_record", "invalid UTF-8 at byte {byte} of the record")
CORRUPT_STREAM = _reason(
    "corrupt_stream",
    "corrupt {codec} stream near compressed byte {offset}; the rest of the file was not read",
)
TRUNCATED_STREAM = _reason(
    "truncated_stream",
    "truncated {codec} stream: input ended after {offset} compressed bytes; "
    "the unread tail was lost",
)

# quarantine: chat records that cannot be a conversation
NO_CONVERSATION = _reason(
    "no_conversation", "chat: no messages, conversations or instruction field"
)
NOT_A_LIST = _reason("not_a_list", "chat: {field!r} is {kind}, not an array of messages")
MESSAGE_NOT_OBJECT = _reason("message_not_object", "chat: message {i} is {kind}, not an object")
MESSAGE_KEY_TYPE = _reason("message_key_type", "chat: message {i} {key!r} is {kind}, not a string")
UNKNOWN_ROLE = _reason("unknown_role", "chat: unknown role in message {i}")
UNCARRIED_KEY = _reason(
    "uncarried_key",
    "chat: message {i} has {key!r}, which curate does not carry (role and content only)",
)
ALPACA_TYPE = _reason("alpaca_type", "chat: alpaca {key!r} is {kind}, not a string")
NO_MESSAGES = _reason("no_messages", "chat: no messages")
SYSTEM_MESSAGES = _reason("system_messages", "chat: {n} system messages")
SYSTEM_NOT_FIRST = _reason("system_not_first", "chat: system message at position {i}, not first")
EMPTY_CONTENT = _reason("empty_content", "chat: empty content in message {i} ({role})")
NO_ASSISTANT = _reason("no_assistant", "chat: no assistant turn")
CONTENT_SURROGATE = _reason(
    "content_surrogate", "chat: message {i} content holds a lone surrogate (\\ud800-\\udfff)"
)

# removals by built-in stages (rejected/ and the manifest's `removed` counters)
for _code in ("too_few_chars", "too_many_chars", "too_few_words", "too_many_words",
              "duplicate", "near_duplicate", "empty", "empty_message",
              "special_token_text_in_content", "too_long", "no_assistant_tokens"):  # fmt: skip
    _reason(_code)
QUALITY_RULE = _reason("quality_rule", "{rule}")
LANGUAGE = _reason("language", "language:{code}")
LOW_SCORE = _reason("low_score", "low_score:{code}")
PII = _reason("pii", "pii:{code}")
BENCHMARK = _reason("benchmark", "benchmark:{benchmark}")
CLASSIFIER_BELOW = _reason("classifier_below", "classifier_below:{code}")  # the score column
CLASSIFIER_ABOVE = _reason("classifier_above", "classifier_above:{code}")
CLASSIFIER_LABEL = _reason("classifier_label", "classifier_label:{code}")  # the top label
CLASSIFIER_BUCKET = _reason("classifier_bucket", "classifier_bucket:{bucket}")  # below min
URL_DOMAIN = _reason("url_domain", "url_domain:{list}")
URL_SUBSTRING = _reason("url_substring", "url_substring:{list}")
for _code in ("url_banned_word", "url_soft_banned_words", "url_banned_subword", "url_missing"):
    _reason(_code)
STAGE_DEFAULT = _reason("stage_default", "{stage}")  # a filter that gave no reason: its name
TEMPLATE_RAISED = _reason("template_raised", "template_raised: template line {line}")
TEMPLATE_RAISED_SOMEWHERE = _reason("template_raised_somewhere", "template_raised")
TEMPLATE_ERROR = _reason("template_error", "template_error: {error} at template line {line}")
TEMPLATE_ERROR_SOMEWHERE = _reason("template_error_somewhere", "template_error: {error}")
TEMPLATE_BUDGET = _reason("template_budget_exceeded", "template_budget_exceeded: {budget}")
TEMPLATE_RUNTIME_ERROR = _reason("template_runtime_error", "template_runtime_error: {error}")
NOT_PREFIX_STABLE = _reason(
    "template_not_prefix_stable", "template_not_prefix_stable: assistant message {i}"
)
UNMAPPABLE = _reason(
    "token_offsets_unmappable", "token_offsets_unmappable: tokens of {n} bytes add up to {total}"
)


def known(reason: str) -> bool:
    """Whether `reason` is worded by one of the vocabulary's templates."""
    return any(r.matches(reason) for r in VOCABULARY.values())


def json_problem(msg: str, column: int) -> str:
    """A JSON decoder error as a reason: its fixed message and column, nothing it quoted."""
    if msg not in JSON_MESSAGES:
        return MALFORMED_JSON_OTHER(column=column)
    if msg.endswith(" at"):  # "Unterminated string starting at": the column goes there
        return MALFORMED_JSON_AT(json=msg, column=column)
    return MALFORMED_JSON(json=msg, column=column)


_COLUMN = re.compile(r"^Column\(.*\) ")  # greedy: a key may hold ") " itself
_CHANGED = re.compile(r"a field changed from ([a-z]+ to [a-z]+)")


def arrow_problem(message: str) -> str:
    """An Arrow JSON error (without its "JSON parse error: " and " in row N") as a reason,
    with the column path it names, a record's keys, left out."""
    message = _COLUMN.sub("a field ", message)
    if message in ARROW_MESSAGES:
        return ARROW_REJECTS(arrow=message)
    changed = _CHANGED.fullmatch(message)
    if changed:
        return ARROW_FIELD_CHANGED(change=changed.group(1))
    return ARROW_OTHER()


def template_failure(exc: BaseException, raised: bool) -> str:
    """A chat template's failure as a reason: that the template raised (its own
    `raise_exception`) or the error's class, and the template line, never the message,
    which a template builds from the conversation (`raise_exception('bad role ' + role)`)."""
    import traceback

    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
             if f.filename == "<template>" and f.lineno]  # fmt: skip
    if raised:
        return TEMPLATE_RAISED(line=lines[-1]) if lines else TEMPLATE_RAISED_SOMEWHERE()
    error = type(exc).__name__
    if lines:
        return TEMPLATE_ERROR(error=error, line=lines[-1])
    return TEMPLATE_ERROR_SOMEWHERE(error=error)
