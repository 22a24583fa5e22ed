"""Keeping Presidio off the network.

Two things in a default Presidio reach out: `AnalyzerEngine()` downloads a spaCy model
when none is installed, and the e-mail recognizer's domain check (tldextract) fetches the
public-suffix list on first use and caches it under ~/.cache. curate never builds the
default engine (see `analyzer.py`: the no-op NLP engine, or a spaCy pipeline that must
already be installed or on disk), and here tldextract is pointed at the suffix list
bundled in its wheel, with no cache folder: no fetch, no file written, and the same
answer on every machine with the same tldextract version (which enters the fingerprint).
"""

from __future__ import annotations

import os

SUFFIX_URLS_ENV = "TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"


def prepare() -> None:
    """Make tldextract offline; call before anything imports Presidio."""
    # Read by tldextract when it builds an extractor: an empty list means no fetch.
    os.environ[SUFFIX_URLS_ENV] = ""
    import tldextract.tldextract as tld

    current = tld.TLD_EXTRACTOR
    if current.suffix_list_urls or current._cache.enabled:
        # `tldextract.extract`, which Presidio's EmailRecognizer calls, reads this global.
        tld.TLD_EXTRACTOR = tld.TLDExtract(
            cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True
        )


def warm() -> None:
    """Build tldextract's suffix trie now (about 0.3 s, otherwise on the first e-mail
    address a process validates), so that workers forked after setup inherit it."""
    import tldextract.tldextract as tld

    tld.TLD_EXTRACTOR("example.com")
