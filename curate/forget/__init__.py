"""Forgetting documents: `curate forget`, and how a recipe's runs keep them out afterwards.

How exclusion works, and why this way:

- **Kept in the dataset folder, without text.** `<dataset>/.forget/exclusions.json`
  (`exclusions`) holds, per forgotten document, the xxh3-128 of its text as the reader
  reads it and, when the recipe names an `id_field`, its id; plus each request's reason and
  count. Never the text, never the `--match` pattern. Derived ids (`name@offset`,
  `name:line`) shift when a line is inserted, so they are only a cache (`resolved`: the
  ids found per input, valid while that input's stat identity is unchanged).
- **Folded into the fingerprint** (the digest of the hashes and ids), so a run of the
  recipe after `curate forget` computes the fingerprint forget published under and
  returns that version: a no-op.
- **Dropped as early as nothing needs them** (`curate.excluded_rows`): after the last
  barrier's summary (or on reading, with no barrier). Excluded documents take part in
  deduplication exactly as before, so forgetting a cluster's kept document promotes no
  other member; nothing a barrier summarizes changes, so the stage cache's keys do not
  change either.
- **`curate forget` is a run** of the recipe with the new exclusions: every partition is
  replayed from the stage cache (no stage runs again, no text is tokenized again), the
  forgotten rows are dropped on the way, and the publish step hard-links every shard whose
  bytes did not change from the previous version (`curate.shared_files`). Its shards and
  lineage are byte-identical to a rebuild's with the exclusions (the same rows reach the
  writer in the same order); with the cache off or evicted it costs a rebuild, and is
  still right.
- **Kept out of what a run writes beside the shards:** rejected rows, examples (removed
  or shown as a duplicate's kept document) and the stage cache (a partition holding an
  excluded document keeps no entry of rows: its documents' text would be in it). A
  barrier's summaries of them are kept: its decision needs them. A run's staging never
  holds their text: after a barrier that changes the documents it keeps, the next pass
  reads them from the inputs again (`curate.excluded_rows`).
- Resolution (`resolve`): at each build, inputs whose stat identity changed since the
  ids were resolved (and new inputs) are read once more by the driver, and every record
  whose text hash is excluded is excluded by its current id. What was found in an input
  as it was before is kept beside (`earlier`), and an input gone keeps its entry: `where`
  and the purge look in each version for the ids of its own inputs' state.
"""
