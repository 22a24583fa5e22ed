"""Personal data detection and removal for the `pii` stage, built on Presidio.

Nothing here is imported by `import curate`: Presidio and spaCy load in a worker's
`setup()`, through `analyzer.Analysis` (with the local engine's forked workers, once in
the driver before the fork: `fork_setup.set_up_before_fork`).

    offline.py   no network: no spaCy download, tldextract on its bundled suffix list
    lean.py      Presidio imported without torch and transformers (6 s per process)
    quiet.py     Presidio's log records never reach the log (they can quote document text)
    keys.py      the hashing key: from an environment variable or a file, and its identity
    phone.py     Presidio's phone recognizer with shared scans and remembered verdicts
    phone_filter.py  parts that cannot be a valid number in a region, told without parsing
    windows.py   pattern recognizers run only on windows that can hold a match
    analyzer.py  the Presidio analyzer for a configuration, and per-document entity gates
    spans.py     overlapping results resolved as Presidio's anonymizer does; replacements
"""
