"""Character classes the rules are written with (Rust regex syntax, as polars runs it).

Where datatrove lists characters by hand, curate uses the Unicode property that the list
approximates, so the rules hold for every script the same way:

- a *symbol word* is made only of punctuation, symbols or control characters
  (general categories P*, S*, Cc); datatrove's hand-made set also covers ASCII symbols
  but not, say, "©" or "→";
- a *terminal punctuation mark* has the Unicode property Sentence_Terminal, which is
  also what spaCy's sentencizer and datatrove's TERMINAL_PUNCTUATION list;
- a *line break* is what Python's `str.splitlines()` breaks on.
"""

SYMBOL_WORD = r"^[\p{P}\p{S}\p{Cc}]+$"
PUNCT_WORD = r"^\p{P}+$"
ALPHA = r"\p{L}"
TERMINAL = r"\p{Sentence_Terminal}"
TERMINAL_AT_END = TERMINAL + r"$"
SENTENCE_MARK = r"^" + TERMINAL + r"$"
LINE_BREAK = r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"
"""What `str.splitlines()` splits on (CRLF counts once)."""
