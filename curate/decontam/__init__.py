"""Benchmark decontamination: word n-grams shared with evaluation sets.

words.py       text -> normalized words -> 64-bit n-gram keys, for a whole batch
index.py       benchmark files -> the set of n-grams that count as evidence
cut.py         the character spans of matched n-grams, for cutting them out
"""
