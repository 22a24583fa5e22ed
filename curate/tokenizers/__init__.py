"""Base-model tokenizers loaded from local files, each with the fastest encoder that is exact.

Nothing here touches the network: a hub model id is looked up in the local Hugging Face
cache only. The heavy libraries (`tokenizers`, `sentencepiece`, `tiktoken`) are imported
when an encoder is built, never when curate is imported.

```
source.py      what a recipe names (file, folder, hub id) -> the files and their family
hub.py         a hub model id -> its folder in the local Hugging Face cache, offline
identity.py    sha256 of every tokenizer file, the tokenizer fingerprint trainers compare
encoders.py    the encoder contract and the choice of encoder per family
hf_json.py     tokenizer.json through `tokenizers`
spm.py         SentencePiece .model through `sentencepiece`
tiktoken_bpe.py  tiktoken ranks files and Mistral tekken .json through `tiktoken`
policy.py      which BOS/EOS ids are added around every document, and why
```
"""

from __future__ import annotations

from curate.tokenizers.identity import tokenizer_fingerprint
from curate.tokenizers.source import TokenizerSource, resolve_source

__all__ = ["TokenizerSource", "resolve_source", "tokenizer_fingerprint"]
