"""One chat or instruction record, in any of the accepted shapes, as a list of messages.

A record with an impossible structure gets a reason and is quarantined; nothing is
repaired (no role guessed, no empty turn dropped, no system message merged), because
a silently fixed conversation trains a different model than the one its owner meant.
Reasons come from `curate.reasons`: positions, fixed keys and known roles, never content
(an unknown role's value is content: the reason says which message, not what it held).
"""

from __future__ import annotations

from typing import Any

from curate import reasons as why
from curate.chat.spec import ROLES, ChatInput

Messages = list[tuple[str, str]]

NO_CONVERSATION = why.NO_CONVERSATION()
NOT_A_LIST = ", not an array of messages"
"""The reasons that say a record lacks the field a chat shape reads (a setting to check)."""

SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "system": "system", "tool": "tool"}

UNCARRIED = frozenset(
    {"tool_calls", "function_call", "tool_call_id", "reasoning_content", "thinking", "weight"}
)
"""Message keys that change what a chat template renders or what the loss is on (OpenAI's
`weight: 0` excludes a turn from training). The `messages` column holds role and content
only, so a message carrying one is quarantined rather than silently stripped of it; any
other key (a timestamp, a source tag) changes neither and is ignored."""


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "an array", dict: "an object"}.get(type(value), type(value).__name__)  # fmt: skip


def shape_of(record: dict[str, Any], spec: ChatInput) -> str | None:
    if spec.shape != "auto":
        return spec.shape
    if spec.field is not None and spec.field in record:
        return "messages"
    for key, shape in (("messages", "messages"), ("conversations", "sharegpt")):
        if key in record:
            return shape
    return "alpaca" if "instruction" in record else None


def to_messages(record: dict[str, Any], spec: ChatInput) -> Messages | str:
    """The record's messages, or why it cannot be a conversation."""
    shape = shape_of(record, spec)
    if shape is None:
        return NO_CONVERSATION
    if shape == "alpaca":
        found = _alpaca(record, spec)
    else:
        sharegpt = shape == "sharegpt"
        default = "conversations" if sharegpt else "messages"
        keys = ("from", "value") if sharegpt else ("role", "content")
        found = _turns(record, spec.field or default, keys, sharegpt, spec)
    return found if isinstance(found, str) else check(found)


def _turns(
    record: dict[str, Any], field: str, keys: tuple[str, str], sharegpt: bool, spec: ChatInput
) -> Messages | str:
    turns = record.get(field)
    if not isinstance(turns, list):
        return why.NOT_A_LIST(field=field, kind=_kind(turns))
    out: Messages = []
    role_key, content_key = keys
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            return why.MESSAGE_NOT_OBJECT(i=i, kind=_kind(turn))
        role, content = turn.get(role_key), turn.get(content_key)
        if not isinstance(role, str):
            return why.MESSAGE_KEY_TYPE(i=i, key=role_key, kind=_kind(role))
        mapped = spec.roles.get(role) or (SHAREGPT_ROLES.get(role) if sharegpt else None) or role
        if mapped not in ROLES:
            return why.UNKNOWN_ROLE(i=i)
        for key in sorted(UNCARRIED.intersection(turn)):
            if turn[key] is not None and not (key == "weight" and turn[key] == 1):
                return why.UNCARRIED_KEY(i=i, key=key)
        if not isinstance(content, str):
            return why.MESSAGE_KEY_TYPE(i=i, key=content_key, kind=_kind(content))
        out.append((mapped, content))
    return out


def _alpaca(record: dict[str, Any], spec: ChatInput) -> Messages | str:
    values = {}
    for key, required in (("system", False), ("instruction", True), ("input", False),
                          ("output", True)):  # fmt: skip
        value = record.get(key)
        if value is None and not required:
            value = ""
        if not isinstance(value, str):
            return why.ALPACA_TYPE(key=key, kind=_kind(value))
        values[key] = value
    user = values["instruction"]
    if values["input"]:
        user = user + spec.alpaca_join + values["input"]
    out: Messages = [("system", values["system"])] if values["system"] else []
    return [*out, ("user", user), ("assistant", values["output"])]


def check(messages: Messages) -> Messages | str:
    """The structure every chat template can render, or the first reason it is not."""
    if not messages:
        return why.NO_MESSAGES()
    systems = [i for i, (role, _) in enumerate(messages) if role == "system"]
    if len(systems) > 1:
        return why.SYSTEM_MESSAGES(n=len(systems))
    if systems and systems[0] != 0:
        return why.SYSTEM_NOT_FIRST(i=systems[0])
    for i, (role, content) in enumerate(messages):
        if not content.strip():
            return why.EMPTY_CONTENT(i=i, role=role)
    if not any(role == "assistant" for role, _ in messages):
        return why.NO_ASSISTANT()
    return messages
