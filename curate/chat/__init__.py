"""Chat and instruction records: from their input shapes to one `messages` column, and
through the base model's own chat template into ids, labels and loss masks.

```
spec.py      the recipe's `chat:` key (which shape, which fields, how roles map)
shapes.py    one record (messages / ShareGPT / Alpaca) -> [(role, content)] or a reason
reader.py    JSONL partitions of chat records -> batches with a `messages` column
template.py  the model's chat template, found and compiled in a sandboxed Jinja environment
mask.py      which characters, then which tokens, belong to the assistant's turns
```
"""

from __future__ import annotations

from curate.chat.spec import MESSAGES, ChatInput, messages_type

__all__ = ["MESSAGES", "ChatInput", "messages_type"]
