"""Examples of what a run removed: per stage and reason, a few documents to look at.

A report that says "quality_filter removed 3,112 documents for gopher:mean_word_length"
is half an answer; the other half is a handful of those documents. Each version keeps,
per stage and reason, the removed documents whose ids hash smallest (xxh3_64 of the id,
ties by id): a choice that depends on the set of removed ids alone, so it is the same
whatever the worker count, the engine, the partitioning into chunks, or how much of the
run the stage cache replayed, and it merges exactly (the smallest K of a union are the
smallest K of each part's smallest K).

- `options`: the recipe's `output.examples`;
- `curate.stages.examples` (beside the loop that runs map stages, which calls it): the
  hash, the choosing, and a map stage's removed rows getting their text attached where
  they are removed (the only place it exists), chosen per chunk;
- `barriers`: a barrier's removed documents and the documents they duplicate, taken at
  publish from its decision and the rows it decided on (staged by the pass before);
- `privacy`: every text (and id) shown passes through the recipe's `pii` stages before it
  is stored, values replaced by their type tags;
- `files`: the version's `examples/` files (one Arrow file per stage, keyed by a hash of
  the document id so an erasure can find them), written at publish and read back;
- `show`: what `curate show --examples` prints.
"""
