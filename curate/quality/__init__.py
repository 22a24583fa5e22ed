"""The published heuristic quality rule sets, computed over whole batches.

Each rule set is a module with a typed parameter model (its defaults are the published
values, cited in the module) and one function that returns, for every document of a
batch, whether each rule would remove it. They share one view of the batch
(`docs.DocBatch`): its words, lines and paragraphs are split once, as exploded polars
columns, and every statistic is a vectorised aggregation over them.

    words.py          the word splitter (English, close to spaCy's tokenizer)
    patterns.py       Unicode classes: punctuation, sentence terminals, line breaks
    stopwords.py      Gopher's stop words
    docs.py           a batch's texts with their words, lines and paragraphs, split once
    ngrams.py         word n-gram keys; most frequent and duplicated n-gram characters
    gopher_quality.py, gopher_repetition.py, c4.py, fineweb.py   the rule sets
    rulesets.py       the rule sets by name, in evaluation order
"""
