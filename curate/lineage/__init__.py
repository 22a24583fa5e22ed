"""Lineage: where every document of a version came from, and where it went.

The readers put each record's place in its input (its line or row, and the byte offset
of its line where the format has one) beside the row as hidden columns (`_line`,
`_offset`, `curate.io.batches`); they ride with the rows through stages, staging and the
stage cache to the shard writer, which keeps them per partition
(`curate.output.lineage_rows`) instead of writing them into the shards; `_changed` and
`_pii` ride with them (which map stages changed the text; what a pii stage found). At
publish they become the version's side table
(`publish`): one row per document written, in output order (shard, row, token start),
with its input, line and offset, and an index by id hash so one document is found
without reading the rest (`lookup`). `curate trace` (`trace`) reads them back.
"""
