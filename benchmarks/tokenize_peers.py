"""The contenders of the tokenize benchmark other than curate, each run as its own process.

    python -m benchmarks.tokenize_peers limit --encoder sentencepiece --tokenizer F --eos 2 ...
    python -m benchmarks.tokenize_peers hf --tokenizer T.json --eos 2 --corpus D --out O ...
    python -m benchmarks.tokenize_peers datatrove --tokenizer T.json --eos-token '</s>' ...

Same semantics everywhere: each document's text encoded with no special tokens added and
special-token strings in the text encoded as text, then the EOS id appended. `limit`
times only the encoder on text already in memory (its figure is the ceiling for an end
to end run); it digests the ids outside the timed region.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

BATCH_DOCS = 1000


def read_texts(corpus: Path) -> list[str]:
    texts = []
    for path in sorted(corpus.glob("*.jsonl")):
        with open(path, "rb") as f:
            texts.extend(json.loads(line)["text"] for line in f)
    return texts


def make_encoder(kind: str, tokenizer: str, threads: int):  # type: ignore[no-untyped-def]
    """A function texts -> list of id arrays/lists, for one exact encoder."""
    if kind == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=tokenizer)
        return lambda texts: sp.encode(texts, out_type="numpy", num_threads=threads)
    if kind == "tiktoken":
        import base64

        import tiktoken

        data = json.loads(Path(tokenizer).read_text())
        n_special = data["config"]["default_num_special_tokens"]
        inner = data["config"]["default_vocab_size"] - n_special
        ranks = {base64.b64decode(t["token_bytes"]): t["rank"] for t in data["vocab"][:inner]}
        enc = tiktoken.Encoding(
            "tekken", pat_str=data["config"]["pattern"], mergeable_ranks=ranks, special_tokens={}
        )

        def encode(texts: list[str]) -> list[np.ndarray]:
            lists = enc.encode_ordinary_batch(texts, num_threads=threads)
            return [np.asarray(ids, dtype=np.uint32) + n_special for ids in lists]

        return encode
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(tokenizer)
    tok.encode_special_tokens = True
    return lambda texts: [e.ids for e in tok.encode_batch_fast(texts, add_special_tokens=False)]


def run_limit(args: argparse.Namespace) -> dict[str, object]:
    import xxhash

    texts = read_texts(args.corpus)
    nbytes = sum(len(t.encode()) for t in texts)
    encode = make_encoder(args.encoder, args.tokenizer, args.threads)
    eos = np.array([args.eos], dtype=np.uint32).tobytes()
    digest, tokens, seconds, cpu = xxhash.xxh3_128(), 0, 0.0, 0.0
    for i in range(0, len(texts), BATCH_DOCS):
        started, cpu_started = time.perf_counter(), time.process_time()
        out = encode(texts[i : i + BATCH_DOCS])
        seconds += time.perf_counter() - started
        cpu += time.process_time() - cpu_started
        for ids in out:  # outside the timed region
            arr = np.asarray(ids, dtype=np.uint32)
            digest.update(arr.tobytes())
            digest.update(eos)
            tokens += len(arr) + 1
    return {
        "encode_s": seconds,
        "encode_cpu_s": cpu,
        "bytes": nbytes,
        "docs": len(texts),
        "tokens": tokens,
        "digest": digest.hexdigest(),
    }


def run_hf(args: argparse.Namespace) -> dict[str, object]:
    """datasets.load_dataset('json') + .map(batched=True, num_proc=2) + save_to_disk."""
    os.environ["RAYON_NUM_THREADS"] = "1"  # one process per core, like the others
    import datasets

    files = sorted(str(p) for p in args.corpus.glob("*.jsonl"))
    ds = datasets.load_dataset("json", data_files=files, split="train", cache_dir=str(args.scratch))
    dtype = "uint16" if args.vocab <= 1 << 16 else "uint32"
    features = datasets.Features(
        {"id": datasets.Value("string"), "input_ids": datasets.List(datasets.Value(dtype))}
    )
    path, eos = args.tokenizer, args.eos

    def encode(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        global _TOK
        if _TOK is None:
            import tokenizers

            _TOK = tokenizers.Tokenizer.from_file(path)
            _TOK.encode_special_tokens = True
        out = _TOK.encode_batch_fast(batch["text"], add_special_tokens=False)
        return {"input_ids": [[*e.ids, eos] for e in out]}

    ds = ds.map(encode, batched=True, num_proc=2, remove_columns=["text"], features=features)
    ds.save_to_disk(str(args.out))
    return {"rows": len(ds)}


_TOK = None


def run_datatrove(args: argparse.Namespace) -> dict[str, object]:
    """JsonlReader + DocumentTokenizer (no shuffling), one task per input file, 2 workers."""
    os.environ["RAYON_NUM_THREADS"] = "1"
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer

    class ExactDocumentTokenizer(DocumentTokenizer):  # type: ignore[misc]
        """Special-token strings in text stay text, as in every other contender."""

        @property
        def tokenizer(self):  # type: ignore[no-untyped-def]
            tok = super().tokenizer
            tok.encode_special_tokens = True
            return tok

    files = sorted(args.corpus.glob("*.jsonl"))
    pipeline = [
        JsonlReader(
            str(args.corpus),
            glob_pattern="*.jsonl",
            text_key="text",
            id_key="id",
            doc_progress=False,
        ),
        ExactDocumentTokenizer(
            output_folder=str(args.out),
            tokenizer_name_or_path=args.tokenizer,
            eos_token=args.eos_token,
            shuffle_documents=False,
            batch_size=BATCH_DOCS,
        ),
    ]
    executor = LocalPipelineExecutor(
        pipeline=pipeline, tasks=len(files), workers=2, logging_dir=str(args.scratch / "logs")
    )
    executor.run()
    return {"tasks": len(files)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("contender", choices=["limit", "hf", "datatrove"])
    parser.add_argument("--encoder", default="tokenizers")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--eos", type=int, default=2)
    parser.add_argument("--eos-token", default="</s>")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--scratch", type=Path)
    args = parser.parse_args()
    run = {"limit": run_limit, "hf": run_hf, "datatrove": run_datatrove}[args.contender]
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
