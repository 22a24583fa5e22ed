"""Dropping documents by their URL: block and allow lists, and FineWeb's URL words.

```yaml
fields: {url: string}                 # the URL must be kept from the inputs
stages:
  - url_filter:
      block:
        - {name: ut1, path: lists/blacklists, categories: [adult, phishing]}  # UT1 folder
        - {name: spam, path: lists/spam_domains.txt}                          # domains
        - {name: ads, path: lists/ad_paths.txt, kind: urls}                   # substrings
      allow:
        - {name: ours, path: lists/trusted_domains.txt}
      banned_words: lists/banned_words.txt        # FineWeb's lists (datatrove's assets)
      soft_banned_words: lists/soft_banned_words.txt
      banned_subwords: lists/banned_subwords.txt
      soft_word_threshold: 2
      missing_url: keep                           # or drop
```

A domain entry names the domain and every subdomain of it: the URL's host and each parent
down to its registered domain, found through the public-suffix list bundled in tldextract
(offline: `curate.urls.hosts`), are looked up. A URL entry matches a URL that contains it
(both lowercased, without `scheme://`). A URL an allow list names is kept whatever else
it fails. Reasons name the rule and the list (`url_domain:ut1/adult`,
`url_substring:ads`, `url_banned_word`, `url_soft_banned_words`, `url_banned_subword`,
`url_missing`); a document failing several gets the first, in that order. Every list
file's sha256 enters the fingerprint and the manifest's stage details, so editing a list
makes a new version. Works on text and chat records alike: it reads only the URL column.
"""

from __future__ import annotations

import contextlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field, model_validator

from curate.digests import sha256_file
from curate.errors import CurateError, shown
from curate.reasons import URL_DOMAIN, URL_SUBSTRING
from curate.stages.base import FilterStage, StageParams
from curate.stats import Stats
from curate.urls.lists import NAME, ListFile, list_files

_WORD_FILES = ("banned_words", "soft_banned_words", "banned_subwords")


class UrlList(StageParams):
    name: str = Field(pattern=rf"^{NAME}$", description="Named in reasons (url_domain:<name>).")
    path: str = Field(
        description="A plain list file, or a folder in the UT1 layout (category folders "
        "holding `domains` and `urls` files); relative to the recipe."
    )
    kind: Literal["domains", "urls"] = Field(
        "domains",
        description="A plain file's entries: domains (each with its subdomains) or URL "
        "substrings. A UT1 folder's files say their kind by their name.",
    )
    categories: list[str] | None = Field(
        None, description="A UT1 folder's categories to read, in order; default: all."
    )


class UrlFilterParams(StageParams):
    url_field: str = Field("url", description="The column holding the URL (keep it: fields).")
    block: list[UrlList] = Field(default_factory=list, description="Lists of URLs to drop.")
    allow: list[UrlList] = Field(
        default_factory=list, description="Lists of URLs kept whatever else they fail."
    )
    banned_words: str | None = Field(None, description="Drop a URL holding one of these words.")
    soft_banned_words: str | None = Field(
        None, description="Drop a URL holding soft_word_threshold of these words."
    )
    banned_subwords: str | None = Field(
        None, description="Drop a URL holding one of these within its letters and digits."
    )
    soft_word_threshold: int = Field(2, ge=1, description="FineWeb's value: 2.")
    missing_url: Literal["keep", "drop"] = Field(
        "keep", description="A document without a URL (null or empty): kept or dropped."
    )
    private_suffixes: bool = Field(
        False,
        description="Count the public-suffix list's private domains (blogspot.com) as "
        "suffixes, so a.blogspot.com is a registered domain of its own.",
    )

    @model_validator(mode="after")
    def _something_to_do(self) -> UrlFilterParams:
        words = any(getattr(self, f) for f in _WORD_FILES)
        if not (self.block or words or self.missing_url == "drop"):
            raise ValueError("nothing to drop: give block lists, word lists, or missing_url: drop")
        names = [x.name for x in [*self.block, *self.allow]]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"list names must differ: {', '.join(twice)} given twice")
        return self


class UrlFilter(FilterStage[UrlFilterParams]):
    """Drops documents whose URL a block list or FineWeb's word rules name."""

    name = "url_filter"
    Params = UrlFilterParams
    reads = ()
    shapes = ("text", "chat")

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.url_field,)

    def _path(self, path: str) -> Path:
        return (Path(self.context.base_dir) / path).resolve()

    def _lists(self, lists: list[UrlList]) -> list[ListFile]:
        return [f for x in lists
                for f in list_files(x.name, self._path(x.path), x.kind, x.categories)]  # fmt: skip

    def _files(self) -> list[Path]:
        """Every file the stage reads, in a fixed order."""
        p = self.params
        words = [self._path(w) for f in _WORD_FILES if (w := getattr(p, f))]
        return [f.path for f in self._lists([*p.block, *p.allow])] + words

    def _digests(self) -> dict[str, str]:
        """sha256 of each file read, remembered by path, size and mtime."""
        try:
            files = self._files()
            stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
            cached = self.__dict__.get("_digest_cache")
            if cached is None or cached[0] != stamp:
                cached = (stamp, {str(f): sha256_file(f) for f in files})
                self.__dict__["_digest_cache"] = cached
        except OSError as exc:
            raise CurateError(
                f"url_filter: cannot read {shown(exc.filename)}: {exc.strerror}"
            ) from None
        return cached[1]

    def software(self) -> dict[str, str]:
        from curate.urls.hosts import software

        out = software()
        with contextlib.suppress(PackageNotFoundError):  # setup says which extra to install
            out["pyahocorasick"] = version("pyahocorasick")
        out.update({f"url_filter:{k}": v for k, v in self._digests().items()})
        return out

    def describe(self) -> dict[str, Any]:
        p = self.params
        digests = self._digests()

        def side(lists: list[UrlList]) -> list[dict[str, Any]]:
            return [{"name": x.name, "path": str(self._path(x.path)),
                     "files": [{"list": f.label, "kind": f.kind, "path": str(f.path),
                                "sha256": digests[str(f.path)]}
                               for f in self._lists([x])]}
                    for x in lists]  # fmt: skip

        words = {f: {"path": str(self._path(w)), "sha256": digests[str(self._path(w))]}
                 for f in _WORD_FILES if (w := getattr(p, f))}  # fmt: skip
        return {
            "block": side(p.block),
            "allow": side(p.allow),
            "words": words,
            "soft_word_threshold": p.soft_word_threshold,
            "missing_url": p.missing_url,
            "suffix_list": "the public-suffix snapshot bundled in tldextract (never fetched)",
        }

    def setup(self) -> None:
        from curate.urls.hosts import EXTRA, offline_extractor
        from curate.urls.matcher import Side, UrlMatcher
        from curate.urls.words import WordRules, read_words, substring_automaton

        p = self.params
        try:
            import ahocorasick  # noqa: F401
        except ImportError:
            raise CurateError(f"url_filter needs pyahocorasick: {EXTRA}") from None
        words = {f: read_words(self._path(w)) if (w := getattr(p, f)) else frozenset()
                 for f in _WORD_FILES}  # fmt: skip
        rules = WordRules(words["banned_words"], words["soft_banned_words"],
                          substring_automaton(words["banned_subwords"]),
                          p.soft_word_threshold)  # fmt: skip
        self._matcher = UrlMatcher(
            Side.build(self._lists(p.block)),
            Side.build(self._lists(p.allow)),
            rules,
            offline_extractor(p.private_suffixes),
            drop_missing=p.missing_url == "drop",
        )

    def _judge(self, batch: pa.RecordBatch) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
        if getattr(self, "_matcher", None) is None:
            self.setup()
        column = batch.column(self.params.url_field)
        if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
            raise CurateError(
                f"url_filter: column '{self.params.url_field}' is {column.type}, not a string"
            )
        return self._matcher.judge(column.to_pylist())

    def keep(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        return self.keep_with_stats(batch)[:2]

    def keep_with_stats(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, Stats]:
        """The keep mask and each removed document's first rule; statistics count the
        documents without a URL (`url/missing`) and those an allow list kept although a
        rule names them (`url/allowed`)."""
        hits, allowed, missing = self._judge(batch)
        rules = self._matcher.rules
        n = batch.num_rows
        keep = np.ones(n, dtype=bool)
        reasons = np.full(n, None, dtype=object)
        rescued = 0
        for i, h in enumerate(hits):
            if not h:
                continue
            if allowed[i]:
                rescued += 1
                continue
            keep[i] = False
            reasons[i] = _reason(rules[h[0]])
        stats = Stats()
        if self.context.stats:
            stats.count("url/missing", int(missing.sum()))
            stats.count("url/allowed", rescued)
        return keep, reasons, stats

    def explain(self, batch: pa.RecordBatch) -> list[tuple[str, np.ndarray]]:
        """Each rule that fails a document of the batch, and the documents it fails (each
        rule as if alone; an allowed document fails none), in the order of reasons."""
        hits, allowed, _ = self._judge(batch)
        rules = self._matcher.rules
        fails = np.zeros((len(rules), batch.num_rows), dtype=bool)
        for i, h in enumerate(hits):
            if h and not allowed[i]:
                fails[h, i] = True
        return [(_reason(rules[r]), fails[r]) for r in range(len(rules)) if fails[r].any()]

    def shown(self, batch: pa.RecordBatch) -> list[str]:
        """What inspect-filter shows of each document: its URL."""
        return [u or "(no URL)" for u in batch.column(self.params.url_field).to_pylist()]


def _reason(rule: str) -> str:
    kind, _, label = rule.partition(":")
    if kind == "url_domain":
        return URL_DOMAIN(list=label)
    if kind == "url_substring":
        return URL_SUBSTRING(list=label)
    return rule
