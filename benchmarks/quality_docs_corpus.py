"""The second corpus the quality rule sets are compared on: man pages, code and documentation.

The prose corpus (`benchmarks.quality_corpus`) is what the rules were made for; this one
is what a team finds on a machine and runs them over anyway, where C4's line removal
matters most (most lines of a man page or a source file end without a full stop):

- ``man``: whole English man pages (sections 1-8), rendered by groff as a terminal of 80
  columns shows them (``-Tutf8``, no overstriking), ``MAN_PAGES`` of them;
- ``code``: Python, C, shell and other source files of the Python standard library and
  of the packages installed in /work/venv, ``CODE_FILES`` of them;
- ``doc``: every other text file under /usr/share/doc (READMEs, changelogs, copyright
  files, examples), ``DOC_FILES`` of them.

Each source's candidates are listed in sorted order and sampled with
``random.Random(SEED)``; only UTF-8 text of 200 bytes to ``MAX_DOC_BYTES`` is used. The
documents are written in the order of a hash of their id as JSONL ``{"id", "text",
"source"}``. Nothing is chosen by the filters' verdicts.

    python -m benchmarks.quality_docs_corpus      # work/quality/docs-5500.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import multiprocessing as mp
import random
import subprocess
import sysconfig
from collections import Counter
from pathlib import Path

from benchmarks.quality_corpus import WORK

SEED = 20261204
MAN_PAGES, CODE_FILES, DOC_FILES = 2000, 2000, 1500
MIN_DOC_BYTES, MAX_DOC_BYTES = 200, 100_000
CODE_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".c", ".h", ".cc", ".cpp", ".sh", ".js", ".rs"}


def _text(data: bytes) -> str | None:
    if not MIN_DOC_BYTES <= len(data) <= MAX_DOC_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    return _text(data)


def _render(page: Path) -> tuple[str, str] | None:
    try:
        raw = gzip.decompress(page.read_bytes()) if page.suffix == ".gz" else page.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    rendered = subprocess.run(
        ["groff", "-k", "-man", "-Tutf8", "-rLL=78n", "-P-cbou"],
        input=raw,
        capture_output=True,
        check=False,
    ).stdout
    text = _text(rendered)
    return (f"man:{page.parent.name}/{page.name}", text) if text else None


def _files(roots: list[Path], keep: set[str] | None) -> list[tuple[str, Path]]:
    out = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if keep is not None and path.suffix not in keep:
                continue
            if keep is None and (path.name.lower().startswith(("readme", "news", "changelog"))):
                continue  # those are the prose corpus's
            if path.is_symlink() or not path.is_file():
                continue
            out.append((f"{root.name}/{path.relative_to(root)}", path))
    return out


def _sample(items: list, k: int, rng: random.Random) -> list:
    return rng.sample(items, min(k, len(items)))


def build() -> Path:
    out = WORK / f"docs-{MAN_PAGES + CODE_FILES + DOC_FILES}.jsonl"
    if out.exists():
        return out
    WORK.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    docs: list[dict[str, str]] = []
    pages = sorted(p for p in Path("/usr/share/man").glob("man[1-8]/*") if p.is_file())
    rng.shuffle(pages)
    with mp.get_context("fork").Pool(2) as pool:
        for found in pool.imap(_render, pages, chunksize=16):
            if found is not None:
                docs.append({"id": found[0], "text": found[1], "source": "man"})
            if len(docs) >= MAN_PAGES:
                pool.terminate()
                break
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    code = _files([stdlib, Path("/work/venv/lib/python3.11/site-packages")], CODE_SUFFIXES)
    code = [(f"code:{i}", p) for i, p in dict(code).items()]
    other = [(f"doc:{i}", p) for i, p in _files([Path("/usr/share/doc")], None)]
    for source, items, k in (("code", code, CODE_FILES), ("doc", other, DOC_FILES)):
        rng.shuffle(items)
        taken = 0
        for doc_id, path in items:
            text = _read(path)
            if text is None or not text.strip():
                continue
            docs.append({"id": doc_id, "text": text, "source": source})
            taken += 1
            if taken >= k:
                break
    docs.sort(key=lambda d: hashlib.sha1(d["id"].encode()).digest())
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
    tmp.rename(out)
    print(f"wrote {out}: {len(docs)} documents {dict(Counter(d['source'] for d in docs))}")
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    build()


if __name__ == "__main__":
    main()
