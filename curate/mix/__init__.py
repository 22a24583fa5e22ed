"""Mixtures: weighted, token-budgeted versions drawn from other tokenized versions.

`curate mix mixture.yaml` (`curate.mix.prepare`) resolves the sources (published versions
pinned by fingerprint, or recipes built first), checks they are alike (tokenizer, BOS/EOS
policy, packing, text or chat), draws each source's samples for its share of the budget
(`schedule`), hard-links their shards into a new version with an index of the samples in
interleaved order (`publish`), and records target vs achieved per source in the manifest.
"""
