"""Build the benchmark corpora from real text found on this machine.

Synthetic text would flatter or punish the contenders: normalize and dedup speed
depend on document length, on the share of non-ASCII text and on how many documents
repeat. So a corpus is made of files every machine of this kind has: man pages
(gzip-compressed roff, kept as roff), the files under /usr/share/doc and the Python
standard library sources. One document per source file, written as JSONL lines
``{"id": ..., "text": ...}`` into files of about 50 MB, so a 2-worker engine has
partitions to share.

A corpus of S MB with duplicate rate r holds (1 - r) * S MB of distinct source files
plus exact copies (new ids) of earlier documents until S MB is reached; each copy is
placed after its original, so "keep the first" keeps the original. Source files that
happen to be identical (the same stdlib file in two Python installs, the same licence
text in two packages) are kept as they are: they are natural duplicates, counted
separately. MB means 10**6 bytes of JSONL.

Run ``python -m benchmarks.corpus --size 100 --size 400`` to build (or reuse) them.
``--one-file`` writes the same documents into one file instead (``corpus-<size>-one/``):
how partitions split a single large input is what benchmarks/partition_parallelism.py
measures. ``--file-mb N`` writes the same documents into files of about N MB instead
(``corpus-<size>-f<N>/``): benchmarks/incremental.py adds a whole file as the new data.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sysconfig
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

WORK = Path(__file__).resolve().parent / "work"
MB = 1_000_000
FILE_BYTES = 50 * MB
# Larger files are logs, PostScript and test reports, not prose or code; they also
# would force every JSON reader to use blocks of many megabytes.
MAX_DOC_BYTES = 1 * MB
# The duplicate rate each standard size is built with (share of JSONL bytes that are
# injected copies). 100 MB is real text only; 400 MB repeats documents.
DUP_RATES = {100: 0.0, 400: 0.3}
SEED = 20261202
# Bump when the recipe for building a corpus changes, so cached corpora are rebuilt.
FORMAT = 1


def source_roots() -> list[tuple[str, Path]]:
    """The labelled folders documents come from, in a fixed order."""
    roots = [("man", Path("/usr/share/man")), ("doc", Path("/usr/share/doc"))]
    stdlibs = {Path(sysconfig.get_paths()["stdlib"]).resolve()}
    stdlibs |= {p.resolve() for p in Path("/usr/lib").glob("python3.*") if p.is_dir()}
    roots += [(f"py{i}", p) for i, p in enumerate(sorted(stdlibs))]
    return roots


def candidate_files() -> list[tuple[str, Path]]:
    """Every regular file under the roots, as (id, path), in a stable mixed order.

    Ordering by a hash of the id interleaves man pages, docs and sources, so any
    prefix of the list (the 100 MB corpus) has the same mix as the whole.
    """
    found = []
    for label, root in source_roots():
        for path in sorted(root.rglob("*")):
            if "site-packages" in path.parts or "dist-packages" in path.parts:
                continue
            if label.startswith("py") and path.suffix != ".py":
                continue
            if path.is_symlink() or not path.is_file():
                continue
            found.append((f"{label}:{path.relative_to(root)}", path))
    found.sort(key=lambda item: hashlib.sha1(item[0].encode()).digest())
    return found


def read_text(path: Path) -> str | None:
    """The file's text, or None when it is not a UTF-8 text document we want."""
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    if not data or len(data) > MAX_DOC_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def encode(doc_id: str, text: str) -> bytes:
    return (json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n").encode()


@dataclass
class CorpusInfo:
    """What the results report says about a corpus; also its cache key."""

    size_mb: int
    dup_rate: float
    seed: int = SEED
    format: int = FORMAT
    one_file: bool = False
    file_bytes: int = FILE_BYTES
    files: list[str] = field(default_factory=list)
    bytes: int = 0
    docs: int = 0
    unique_source_docs: int = 0
    injected_dup_docs: int = 0
    injected_dup_bytes: int = 0
    natural_dup_docs: int = 0
    distinct_texts: int = 0
    non_nfc_docs: int = 0
    non_ascii_docs: int = 0
    by_source: dict[str, int] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        other = "" if self.file_bytes == FILE_BYTES else f"-f{self.file_bytes // MB}"
        return WORK / f"corpus-{self.size_mb}{'-one' if self.one_file else other}"

    def describe(self) -> str:
        return (
            f"{self.bytes / MB:.1f} MB, {self.docs} docs in {len(self.files)} files; "
            f"{self.unique_source_docs} source files ({self.natural_dup_docs} of them "
            f"identical to an earlier one), {self.injected_dup_docs} injected copies "
            f"({self.injected_dup_bytes / max(self.bytes, 1):.1%} of bytes, "
            f"{self.injected_dup_docs / max(self.docs, 1):.1%} of docs); "
            f"{self.distinct_texts} distinct texts; {self.non_nfc_docs} docs change under NFC"
        )


def source_documents(limit_bytes: int) -> Iterator[tuple[str, str, bytes]]:
    """(id, text, JSONL line) for source files, in order, until limit_bytes is reached."""
    total = 0
    for doc_id, path in candidate_files():
        if total >= limit_bytes:
            return
        text = read_text(path)
        if text is None:
            continue
        line = encode(doc_id, text)
        total += len(line)
        yield doc_id, text, line
    raise SystemExit(f"only {total / MB:.0f} MB of text found; need {limit_bytes / MB:.0f} MB")


def plan_copies(sizes: list[int], extra_bytes: int, rng: random.Random) -> dict[int, list[int]]:
    """For each source position, the earlier positions whose copies follow it."""
    after: dict[int, list[int]] = defaultdict(list)
    added = 0
    while added < extra_bytes:
        original = rng.randrange(len(sizes))
        after[rng.randrange(original, len(sizes))].append(original)
        added += sizes[original]
    return after


def build(
    size_mb: int, dup_rate: float | None = None, one_file: bool = False, file_mb: int = 0
) -> CorpusInfo:
    """Build the corpus of size_mb (or reuse the cached one) and describe it; one_file
    writes every line into one part-00000.jsonl instead of files of about FILE_BYTES,
    file_mb (when not 0) into files of about file_mb MB."""
    rate = DUP_RATES.get(size_mb, 0.3) if dup_rate is None else dup_rate
    file_bytes = file_mb * MB if file_mb else FILE_BYTES
    info = CorpusInfo(size_mb=size_mb, dup_rate=rate, one_file=one_file, file_bytes=file_bytes)
    cached = info.folder / "corpus.json"
    if cached.exists():
        old = CorpusInfo(**json.loads(cached.read_text()))
        key = (size_mb, rate, SEED, FORMAT, one_file, file_bytes)
        if (old.size_mb, old.dup_rate, old.seed, old.format, old.one_file,
                old.file_bytes) == key:  # fmt: skip
            return old
    docs = list(source_documents(int(size_mb * MB * (1 - rate))))
    unique_bytes = sum(len(line) for _, _, line in docs)
    sizes = [len(line) for *_, line in docs]
    after = plan_copies(sizes, size_mb * MB - unique_bytes, random.Random(SEED))
    info.folder.mkdir(parents=True, exist_ok=True)
    for old_file in info.folder.glob("*.jsonl"):
        old_file.unlink()
    writer = _Splitter(info)
    seen: set[bytes] = set()
    copies: Counter[int] = Counter()
    for position, (doc_id, text, line) in enumerate(docs):
        writer.write(line)
        info.unique_source_docs += 1
        info.by_source[doc_id.split(":")[0]] = info.by_source.get(doc_id.split(":")[0], 0) + 1
        nfc = unicodedata.normalize("NFC", text)
        info.non_nfc_docs += nfc != text
        info.non_ascii_docs += not text.isascii()
        digest = hashlib.sha256(nfc.encode()).digest()
        info.natural_dup_docs += digest in seen
        seen.add(digest)
        for original in after.get(position, []):
            copies[original] += 1
            orig_id, orig_text, _ = docs[original]
            copy = encode(f"{orig_id}#copy{copies[original]}", orig_text)
            writer.write(copy)
            info.injected_dup_docs += 1
            info.injected_dup_bytes += len(copy)
            info.non_nfc_docs += unicodedata.normalize("NFC", orig_text) != orig_text
            info.non_ascii_docs += not orig_text.isascii()
    writer.close()
    info.distinct_texts = len(seen)
    cached.write_text(json.dumps(asdict(info), indent=1))
    return info


class _Splitter:
    """Writes JSONL lines into part-NNNNN.jsonl files of about FILE_BYTES each."""

    def __init__(self, info: CorpusInfo):
        self.info = info
        self.handle = None
        self.in_file = 0

    def write(self, line: bytes) -> None:
        full = self.in_file >= self.info.file_bytes and not self.info.one_file
        if self.handle is None or full:
            self.close()
            name = f"part-{len(self.info.files):05d}.jsonl"
            self.info.files.append(name)
            self.handle = open(self.info.folder / name, "wb")  # noqa: SIM115 - closed in close()
            self.in_file = 0
        self.handle.write(line)
        self.in_file += len(line)
        self.info.bytes += len(line)
        self.info.docs += 1

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", help="corpus size in MB")
    parser.add_argument("--dup-rate", type=float, help="override the size's duplicate rate")
    parser.add_argument("--one-file", action="store_true", help="all lines in one file")
    parser.add_argument("--file-mb", type=int, default=0, help="files of about this many MB")
    args = parser.parse_args()
    for size in args.size or [100]:
        info = build(size, args.dup_rate, args.one_file, args.file_mb)
        print(f"{info.folder}: {info.describe()}")


if __name__ == "__main__":
    main()
