"""Exports of a published version in the formats trainers read: Megatron's indexed dataset
(`.bin/.idx`), MosaicML Streaming's MDS, Parquet and JSONL.

`export(version, to, out)` writes into a staging folder beside `out` and renames it into
place, so `out` is either a complete export or absent; its `export.json` names the source
version and fingerprint, the tokenizer and its BOS/EOS policy, the token type and every
file's checksum, which `curate verify` checks. What a format cannot carry (ids above its
type, a chat version's labels) is refused in one line before anything is written.
"""

from __future__ import annotations

from curate.export.run import FORMATS, export

__all__ = ["FORMATS", "export"]
