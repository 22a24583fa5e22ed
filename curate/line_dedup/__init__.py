"""Repeated-line removal (the `line_dedup` stage): what a document's units are, and the
decision over every document's unit hashes.

`units.py` cuts a text into lines or paragraphs, hashes the ones that count and puts a
text back together without some of them; `decide.py` holds the piece functions the
barrier's decision is made of (count distinct documents per unit hash, then gather each
document's units to remove), run by the engine's collective operations.
"""
