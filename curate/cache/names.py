"""The names the stage cache gives (and the only ones it accepts or deletes).

```
<dataset folder>/.cache/stages/
  .lock                 held shared by every run using the cache, exclusive to evict or clear
  .tmp-<pid>-<hex>/     an entry being written (or removed); a killed run's is swept later
  <key[:2]>/<key>/      a committed entry: meta.json and the files it lists
```
A key or a file name comes from code, never from a user, but it becomes a path: anything
that could lead outside the entry (a `/`, `..`, a leading dot) is refused, as is a name
read from a meta.json that does not match.
"""

from __future__ import annotations

import re

KEY = re.compile(r"^[0-9a-f]{16,64}$")
SHARD = re.compile(r"^[0-9a-f]{2}$")
FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
TEMP = re.compile(r"^\.tmp-\d+-[0-9a-f]{12}$")
META = "meta.json"
LOCK = ".lock"
FORMAT = "curate-stage-cache/1"  # written in every meta.json: an entry of ours


def check_key(key: str) -> str:
    """`key` when it is one (hex, 16 to 64 digits), else ValueError: it names a folder."""
    if not isinstance(key, str) or not KEY.fullmatch(key):
        raise ValueError(f"not a stage cache key (16-64 lowercase hex digits): {key!r}")
    return key


def check_name(name: str) -> str:
    """`name` when it may name a file of an entry, else ValueError."""
    if not isinstance(name, str) or not FILE.fullmatch(name) or name == META:
        raise ValueError(f"not a stage cache file name: {name!r}")
    return name
