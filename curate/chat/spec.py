"""The recipe's `chat:` key: how chat and instruction records become a `messages` column.

It lives in the resolved recipe, so the manifest records the mapping that was applied.
Importing this module imports pydantic and pyarrow only.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

MESSAGES = "messages"
ROLES = ("system", "user", "assistant", "tool")


def messages_type() -> pa.DataType:
    return pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())]))


class ChatInput(BaseModel):
    """Which shape the chat records have, and how their roles and fields map to messages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: Literal["auto", "messages", "sharegpt", "alpaca"] = Field(
        "auto",
        description="messages: {messages: [{role, content}]}; sharegpt: {conversations: "
        "[{from, value}]}; alpaca: {instruction, input, output}; auto: per record, by its keys.",
    )
    field: str | None = Field(
        None, description="The list field (default: messages, or conversations for sharegpt)."
    )
    roles: dict[str, Literal["system", "user", "assistant", "tool"]] = Field(
        default_factory=dict,
        description="Extra role names to map (ShareGPT's human, gpt, system, tool are built in).",
    )
    alpaca_join: str = Field(
        "\n\n", description="Alpaca: put between instruction and a non-empty input (user turn)."
    )

    def batch_schema(self, keep_fields: dict[str, pa.DataType]) -> pa.Schema:
        fields = [pa.field("id", pa.string()), pa.field(MESSAGES, messages_type())]
        fields += [pa.field(name, dtype) for name, dtype in keep_fields.items()]
        return pa.schema(fields)
