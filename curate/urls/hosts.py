"""A URL's host and the parent domains a domain list may name, through tldextract offline.

tldextract fetches the public-suffix list from the network and caches it under ~/.cache
unless told otherwise. Here it is built with no list URLs and no cache folder, so it reads
only the snapshot bundled in its wheel: no fetch, no file written, and the same answer on
every machine with the same tldextract version (which enters the fingerprint).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING

from curate.errors import CurateError

if TYPE_CHECKING:
    from tldextract import TLDExtract

EXTRA = "pip install 'curate[urls]'"


def offline_extractor(private_suffixes: bool = False) -> TLDExtract:
    """A tldextract that reads only its bundled public-suffix snapshot."""
    try:
        from tldextract import TLDExtract
    except ImportError:
        raise CurateError(f"url_filter needs tldextract: {EXTRA}") from None
    return TLDExtract(
        cache_dir=None,
        suffix_list_urls=(),
        fallback_to_snapshot=True,
        include_psl_private_domains=private_suffixes,
    )


def software() -> dict[str, str]:
    """tldextract's version names its bundled suffix list, so it enters the fingerprint."""
    try:
        return {"tldextract": version("tldextract")}
    except Exception:  # not installed: the stage's setup says which extra to install
        return {}


def netloc(url: str) -> str:
    """The host part of a URL exactly as tldextract reads it (no scheme, user, port, path):
    what a cache of host candidates is keyed by, since the candidates depend on it alone."""
    from tldextract.remote import lenient_netloc

    return lenient_netloc(url)


def host_candidates(extract: TLDExtract, url: str) -> list[str]:
    """The URL's host (lowercase) and each parent domain down to the registered one
    (`a.b.example.co.uk`, `b.example.co.uk`, `example.co.uk`): an entry naming any of them
    matches. A host without a public suffix (an IP address, an intranet name) is its only
    candidate, so `2.3.4` never matches `1.2.3.4`."""
    parts = extract(url.lower())
    if not parts.domain:
        return []
    if not parts.suffix:
        host = f"{parts.subdomain}.{parts.domain}" if parts.subdomain else parts.domain
        return [host]
    registered = f"{parts.domain}.{parts.suffix}"
    out = [registered]
    if parts.subdomain:
        labels = parts.subdomain.split(".")
        out += [f"{'.'.join(labels[i:])}.{registered}" for i in range(len(labels) - 1, -1, -1)]
    return out[::-1]
