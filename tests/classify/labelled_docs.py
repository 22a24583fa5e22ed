"""Real documents with labels, for training and checking classifiers: Python standard
library modules (`code`), the sample web pages and notes (`web`), and Debian packages'
copyright files (`legal`). Every tenth document has its line breaks rewritten as one of
the other line boundaries Python's `splitlines` knows (CRLF, CR, VT, FF, U+2028, ...),
so the one-line preprocessing meets them all."""

from __future__ import annotations

import gzip
import json
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BREAKS = ["\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _web() -> list[str]:
    root = REPO / "sample_data"
    texts = []
    for path in [*sorted((root / "web").glob("*.jsonl")), root / "archive.jsonl.gz"]:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    text = json.loads(line)["text"]
                except (ValueError, KeyError, TypeError):
                    continue
                if isinstance(text, str) and text.strip():
                    texts.append(text)
    return texts + [p.read_text(encoding="utf-8") for p in sorted((root / "notes").iterdir())]


def _files(paths: list[Path], n: int, max_chars: int) -> list[str]:
    out = []
    step = max(1, len(paths) // n)
    for path in [p for start in range(step) for p in paths[start::step]]:
        try:
            text = path.read_text(encoding="utf-8")[:max_chars]
        except (OSError, UnicodeDecodeError):
            continue
        if text.strip():
            out.append(text)
        if len(out) == n:
            break
    return out


def labelled_documents(per_class: int = 250, max_chars: int = 6000) -> list[tuple[str, str]]:
    """(label, text) pairs in a fixed order, interleaved by class."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    code = _files(sorted(stdlib.rglob("*.py")), per_class, max_chars)
    legal = _files(sorted(Path("/usr/share/doc").glob("*/copyright")), per_class, max_chars)
    web = [t[:max_chars] for t in _web()][:per_class]
    assert min(len(code), len(legal), len(web)) >= per_class * 0.9, (
        len(code),
        len(legal),
        len(web),
    )
    docs: list[tuple[str, str]] = []
    for i in range(max(len(code), len(legal), len(web))):
        for label, texts in (("code", code), ("web", web), ("legal", legal)):
            if i < len(texts):
                docs.append((label, texts[i]))
    for i in range(0, len(docs), 10):
        label, text = docs[i]
        docs[i] = (label, text.replace("\n", BREAKS[(i // 10) % len(BREAKS)]))
    return docs
