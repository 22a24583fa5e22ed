"""What trainers use to read tokens back: memory-mapped, never widened, resumable.

```python
from curate.loader import open_tokens
tokens = open_tokens("datasets/pretrain", tokenizer="models/my-model")  # refuses a mismatch
ds = tokens.dataset()                          # memory-mapped datasets.Dataset (arrow format)
blocks = tokens.blocks(2048, seed=1, rank=rank, world_size=world, position=consumed)
for block in blocks: ...                       # numpy uint16/uint32, length 2048
loader = data_loader(blocks, batch_size=8, num_workers=2)  # torchdata StatefulDataLoader
```

Blocks are cut from the token stream of the whole version (documents in shard order,
each ending with its EOS separator); when the version was packed with the same length,
the packed rows are the blocks. Samples are read from one global stream, per-epoch
permutations seeded by (seed, epoch) end to end (`curate.loader.stream`); rank r of w
takes every w-th sample of it from the position, the samples all ranks together have
consumed, so a run resumes at any world size or worker count (`data_loader`'s
`state_dict()` is that position). Nothing here imports torch: when the trainer has
imported it, `blocks()` returns a `torch.utils.data.IterableDataset` (or ask with
`.torch()`) that yields the same numpy blocks and splits them among DataLoader workers;
the default collate makes them uint16/uint32 tensors. `dtype=` (`blocks(2048,
dtype=torch.int64)`, or `"int64"`, `np.int32`) converts each block or row as it is read
(one copy of a small array), for what an embedding lookup takes; a type that cannot hold
every stored id is refused.

A version made with `split:` is read one split at a time (`split="validation"`; the
default is `train`). Fine-tuning versions (`chat_template`) open the same way; their
packed rows hold whole conversations of different lengths, so they are read as rows
(`dataset()`: `input_ids`, `labels`, `position_ids`, `cu_seqlens` in their stored
types), never cut into fixed-length blocks.
"""

from curate.loader.blocks import TokenBlocks
from curate.loader.dtypes import output_dtype
from curate.loader.elastic import data_loader
from curate.loader.rows import Rows
from curate.loader.stream import Permutation, SampleOrder
from curate.loader.tokens import TOKENS, TokenizerMismatch, Tokens, open_tokens

__all__ = [
    "TOKENS",
    "Permutation",
    "Rows",
    "SampleOrder",
    "TokenBlocks",
    "TokenizerMismatch",
    "Tokens",
    "data_loader",
    "open_tokens",
    "output_dtype",
]
