"""datatrove's four quality filters as a pipeline, document by document, for the agreement
benchmark (`benchmarks.quality_pipeline`): run by the Python of a venv holding datatrove.

GopherRepetitionFilter -> GopherQualityFilter -> C4QualityFilter -> FineWebQualityFilter
(default arguments, English), each on the text the previous one left (C4 rewrites a
kept document to its kept lines), as datatrove's FineWeb pipeline chains them. Reads
JSONL `{"id", "text"}` and writes JSONL `{"id", "reason", "text"}`: reason None and the
final text for a kept document, "<filter>:<reason>" and no text for a removed one.

    /work/venv-dt/bin/python benchmarks/peers/datatrove_quality.py IN.jsonl OUT.jsonl [WORKERS]
"""

from __future__ import annotations

import json
import multiprocessing as mp
import sys

_CHAIN: list[tuple[str, object]] = []


def _judge(line: str) -> str:
    from datatrove.data import Document
    from datatrove.pipeline import filters

    if not _CHAIN:
        for name, cls in (
            ("gopher_repetition", "GopherRepetitionFilter"),
            ("gopher_quality", "GopherQualityFilter"),
            ("c4", "C4QualityFilter"),
            ("fineweb", "FineWebQualityFilter"),
        ):
            _CHAIN.append((name, getattr(filters, cls)()))
    row = json.loads(line)
    doc = Document(text=row["text"], id=row["id"])
    reason = None
    for name, f in _CHAIN:
        try:
            verdict = f.filter(doc)  # type: ignore[attr-defined]
        except Exception as exc:  # datatrove divides by zero on some inputs
            reason = f"{name}:error:{type(exc).__name__}"
            break
        if isinstance(verdict, tuple) and not verdict[0]:
            reason = f"{name}:{verdict[1]}"
            break
        if verdict is False:
            reason = f"{name}:removed"
            break
    text = doc.text if reason is None else None
    return json.dumps({"id": row["id"], "reason": reason, "text": text})


def main() -> None:
    """OUT "-" writes nothing and prints the count kept (the speed benchmark); one worker
    judges in this process."""
    source, target = sys.argv[1], sys.argv[2]
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    with open(source, encoding="utf-8") as f:
        lines = f.readlines()
    if workers == 1:
        judged = map(_judge, lines)
    else:
        pool = mp.get_context("fork").Pool(workers)
        judged = pool.imap(_judge, lines, chunksize=16)
    kept = 0
    with open(target if target != "-" else "/dev/null", "w") as out:
        for row in judged:
            kept += '"reason": null' in row
            if target != "-":
                out.write(row + "\n")
    print(json.dumps({"kept": kept}))


if __name__ == "__main__":
    main()
