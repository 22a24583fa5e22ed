"""The prose corpus the quality rule sets are compared on: real documents, mostly prose.

Whole man pages and source code nearly all fail the published quality rules, so a
corpus of them says little about agreement. This one is made of prose found on this
machine:

- ``man``: the DESCRIPTION section of each English man page, rendered by groff with
  long lines (a paragraph is one line, as a wide terminal shows it);
- ``readme``: the long descriptions (READMEs) in the METADATA of installed Python
  packages, one per package name;
- ``pydoc``: the Python language reference and library topics in ``pydoc_data``;
- ``docstring``: module, class and function docstrings of the Python standard library
  and of installed packages, with at least ``MIN_WORDS`` words;
- ``doc``: README, NEWS and changelog files under /usr/share/doc (gzip-compressed or not).

Only documents of at least ``MIN_WORDS`` words (``str.split()``) are used: one-line
descriptions say nothing about a rule set's agreement. Every man page description,
README, topic and doc file is taken and docstrings (the most plentiful, and the most
code-like) fill up to the count asked for; documents are ordered by a hash of their id
and written as JSONL ``{"id", "text", "source"}``. Everything found is cached in
work/quality/prose-pool.jsonl. Nothing is chosen by the filters' own
verdicts: sources are picked for being prose, and that is all.

    python -m benchmarks.quality_corpus [--docs 10500]
"""

from __future__ import annotations

import argparse
import ast
import email
import gzip
import hashlib
import json
import multiprocessing as mp
import re
import subprocess
import sys
import sysconfig
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

WORK = Path(__file__).resolve().parent / "work" / "quality"
MAX_DOC_BYTES = 200_000
MIN_WORDS = 40


def _site_packages() -> list[Path]:
    found = {Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    found |= set(Path("/work").glob("*/lib/python3*/site-packages"))
    found = {p for p in found if "venv-dt" not in p.parts}  # datatrove's own, for the benchmarks
    found |= {Path("/usr/lib/python3/dist-packages")}
    return sorted(p for p in found if p.is_dir())


def readmes() -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for site in _site_packages():
        for meta in sorted(site.glob("*.dist-info/METADATA")):
            try:
                msg = email.message_from_string(meta.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
            name = (msg.get("Name") or meta.parent.name).lower()
            body = msg.get_payload()
            if name in seen or not isinstance(body, str) or not body.strip():
                continue
            seen.add(name)
            yield f"readme:{name}", body


def pydoc_topics() -> Iterator[tuple[str, str]]:
    from pydoc_data.topics import topics

    for key in sorted(topics):
        yield f"pydoc:{key}", topics[key]


def docstrings() -> Iterator[tuple[str, str]]:
    stdlibs = {Path(sysconfig.get_paths()["stdlib"]).resolve()}
    stdlibs |= {p.resolve() for p in Path("/usr/lib").glob("python3.*") if p.is_dir()}
    roots = sorted(stdlibs) + _site_packages()
    seen: set[str] = set()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            inside = set(path.relative_to(root).parts)
            if {"site-packages", "dist-packages", "test", "tests"} & inside:
                continue
            try:
                tree = ast.parse(path.read_bytes())
            except (SyntaxError, ValueError, OSError):
                continue
            nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, _DEFS))]
            for node in nodes:
                doc = ast.get_docstring(node, clean=True)  # type: ignore[arg-type]
                if not doc or len(doc.split()) < MIN_WORDS or doc in seen:
                    continue
                seen.add(doc)
                name = getattr(node, "name", "<module>")
                line = getattr(node, "lineno", 0)
                yield f"docstring:{path.relative_to(root)}:{name}:{line}", doc


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def doc_files() -> Iterator[tuple[str, str]]:
    root = Path("/usr/share/doc")
    for path in sorted(root.rglob("*")):
        stem = path.name.lower()
        if not stem.startswith(("readme", "news", "changelog")) or not path.is_file():
            continue
        if path.is_symlink():
            continue
        try:
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            text = data.decode("utf-8")
        except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError):
            continue
        if text.strip() and len(data) <= MAX_DOC_BYTES and "\0" not in text:
            yield f"doc:{path.relative_to(root)}", text


def _description(page: Path) -> tuple[str, str] | None:
    raw = gzip.decompress(page.read_bytes()) if page.suffix == ".gz" else page.read_bytes()
    rendered = subprocess.run(
        ["groff", "-k", "-man", "-Tutf8", "-rLL=2000n", "-rHY=0", "-dAD=l", "-P-cbou"],
        input=raw,
        capture_output=True,
        check=False,
    ).stdout.decode("utf-8", "replace")
    section, body = None, []
    for line in rendered.splitlines():
        if line and not line[0].isspace():  # a heading
            section = line.strip()
        elif section == "DESCRIPTION":
            body.append(line.strip())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(body)).strip()
    return (f"man:{page.parent.name}/{page.name}", text) if text else None


def man_descriptions() -> Iterator[tuple[str, str]]:
    pages = sorted(p for p in Path("/usr/share/man").glob("man[1-8]/*") if p.is_file())
    with mp.get_context("fork").Pool(2) as pool:
        for found in pool.imap(_description, pages, chunksize=32):
            if found is not None:
                yield found


SOURCES = {
    "man": man_descriptions,
    "readme": readmes,
    "pydoc": pydoc_topics,
    "docstring": docstrings,
    "doc": doc_files,
}


def pool() -> list[dict[str, str]]:
    """Every prose document found, cached (rendering the man pages takes minutes)."""
    cache = WORK / "prose-pool.jsonl"
    if not cache.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for source, fn in SOURCES.items():
                for doc_id, text in fn():
                    if len(text.encode()) <= MAX_DOC_BYTES:
                        f.write(json.dumps({"id": doc_id, "text": text, "source": source}) + "\n")
        tmp.rename(cache)
    return [json.loads(line) for line in cache.open(encoding="utf-8")]


def build(docs: int) -> Path:
    out = WORK / f"prose-{docs}.jsonl"
    if out.exists():
        return out
    found = [d for d in pool() if len(d["text"].split()) >= MIN_WORDS]
    found.sort(key=lambda d: hashlib.sha1(d["id"].encode()).digest())
    chosen = [d for d in found if d["source"] != "docstring"]
    chosen += [d for d in found if d["source"] == "docstring"][: max(0, docs - len(chosen))]
    if len(chosen) < docs:
        raise SystemExit(f"only {len(chosen)} prose documents found; asked for {docs}")
    chosen = sorted(chosen[:docs], key=lambda d: hashlib.sha1(d["id"].encode()).digest())
    with open(out, "w", encoding="utf-8") as f:
        for d in chosen:
            f.write(json.dumps(d) + "\n")
    counts = Counter(d["source"] for d in chosen)
    print(f"wrote {out}: {len(chosen)} documents {dict(counts)} of {len(found)} found")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10500)
    build(ap.parse_args().docs)


if __name__ == "__main__":
    main()
