"""The chat_template benchmark: curate's stage end to end against HF datasets + transformers.

    python -m benchmarks.chat_template --size 60 --rounds 3

The corpus is >= 50 MB of conversations made from real text on this machine (the man
pages, /usr/share/doc files and Python sources of benchmarks/corpus.py): each document's
paragraphs become turns (an optional system prompt, then user and assistant turns in
turn), at most a few KB per conversation, written as `{"id", "messages": [{role,
content}]}` JSONL in two files, so both workers get a partition.

The template is Mistral's [INST] style with `{% generation %}` blocks (for transformers'
assistant mask), the tokenizer Mistral's tekken 240911: curate reads the tekken file (its
fastest exact encoder, tiktoken), transformers the same tokenizer as a tokenizer.json
(benchmarks/tokenize_convert.py; identical ids, tests/tokenizers). Conversations whose
contents hold one of tekken's control-token strings (`</s>`, `[INST]`, ...) are left out
of the corpus: transformers parses those as control tokens, mistral-common and curate's
tekken path keep them as text, so the outputs would differ by design (a few hundred;
counted in corpus.json). In paired rounds (each contender once per round, same order):

- **curate**: `curate run` (read JSONL, render, tokenize, mask, write shards with sha256
  and fsync, the manifest), 2 workers, `mask: loss_mask`;
- **HF datasets**: `load_dataset('json')` + `.map(batched=True, num_proc=2)` calling
  `apply_chat_template(tokenize=True, return_dict=True, return_assistant_tokens_mask=True)`
  on each batch of conversations, + `save_to_disk` (benchmarks/chat_template_hf.py).

Both outputs (ids, masks and row lengths, in input order) are digested; the benchmark
fails if they differ. MB/s counts JSONL bytes read; CPU-s and peak memory are of the
whole process tree (benchmarks/measure.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pyarrow as pa
import xxhash

from benchmarks.measure import MIB, Measurement, run_curate_recipe, run_measured, wait_for_quiet
from curate.chat.tokens import alternation

ROOT = Path(__file__).resolve().parent
WORK = ROOT / "work"
TARGET = 3.0
# Mistral's [INST] style, the system prompt put before the first user message (as Mistral's
# later templates do), the assistant's part in {% generation %} blocks for transformers' mask.
TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system = messages[0]['content'] + '\n\n' %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set system = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- bos_token }}"
    "{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif %}"
    "{%- if message['role'] == 'user' %}"
    "{{- '[INST] ' + (system if loop.first else '') + message['content'] + ' [/INST]' }}"
    "{%- else %}"
    "{%- generation %}{{- message['content'] + eos_token }}{%- endgeneration %}"
    "{%- endif %}"
    "{%- endfor %}"
)
MAX_TURN_CHARS = 1500
FORMAT = 2  # bump when the corpus recipe changes
MAX_TURNS = 8


@dataclass
class Result:
    size_mb: int
    contender: str
    round: int
    wall_s: float
    cpu_s: float
    peak_tree_mib: float
    bytes: int
    digest: str
    tokens: int
    load: float  # the machine's 1-minute load average when the run ended (2 cores)
    foreign_load: float  # cores other processes kept busy during the run

    @property
    def mb_s(self) -> float:
        return self.bytes / 1e6 / self.wall_s

    @property
    def mb_cpu_s(self) -> float:
        return self.bytes / 1e6 / self.cpu_s


# -- the corpus ---------------------------------------------------------------------------


def _turns(text: str, rng: random.Random) -> list[str]:
    """A document's paragraphs grouped into turns of at most MAX_TURN_CHARS."""
    turns, buf = [], ""
    for para in (p.strip() for p in text.split("\n\n")):
        if not para:
            continue
        para = para[:MAX_TURN_CHARS]
        if buf and (len(buf) + len(para) > MAX_TURN_CHARS or rng.random() < 0.4):
            turns.append(buf)
            buf = ""
        buf = f"{buf}\n\n{para}" if buf else para
    if buf:
        turns.append(buf)
    return turns


def conversations(text: str, rng: random.Random) -> list[list[dict[str, str]]]:
    """One document's turns cut into conversations: maybe a system prompt, then user and
    assistant in turn, ending with the assistant."""
    turns = _turns(text, rng)
    out = []
    while len(turns) >= 2:
        n = min(len(turns), rng.randint(2, MAX_TURNS))
        taken, turns = turns[:n], turns[n:]
        messages = []
        if len(taken) % 2 == 1:
            messages.append({"role": "system", "content": taken.pop(0)})
        for i, content in enumerate(taken):
            messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": content})
        out.append(messages)
    return out


def build_corpus(size_mb: int) -> Path:
    """The conversations corpus of size_mb (JSONL bytes), cached under benchmarks/work."""
    from benchmarks.corpus import source_documents

    folder = WORK / f"chat-corpus-{size_mb}-v{FORMAT}"
    info = folder / "corpus.json"
    if info.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = random.Random(20261202)
    target = size_mb * 1_000_000
    written, n_conv, n_docs, skipped, files = 0, 0, 0, 0, 2
    special = re.compile(alternation(tekken_specials()))
    outs = [open(folder / f"part-{i:05d}.jsonl", "wb") for i in range(files)]  # noqa: SIM115
    try:
        for doc_id, text, _ in source_documents(4 * target):
            n_docs += 1
            for k, messages in enumerate(conversations(text, rng)):
                if any(special.search(m["content"]) for m in messages):
                    skipped += 1  # see the docstring: one of tekken's control strings
                    continue
                line = json.dumps({"id": f"{doc_id}#{k}", "messages": messages}, ensure_ascii=False)
                data = (line + "\n").encode()
                outs[min(files - 1, written * files // target)].write(data)
                written += len(data)
                n_conv += 1
            if written >= target:
                break
    finally:
        for f in outs:
            f.close()
    if written < target:
        raise SystemExit(f"only {written} bytes of conversations on this machine")
    info.write_text(
        json.dumps(
            {
                "bytes": written,
                "conversations": n_conv,
                "documents": n_docs,
                "skipped_for_control_strings": skipped,
            }
        )
        + "\n"
    )
    return folder


def tekken_specials() -> list[str]:
    from curate.tokenizers.source import resolve_source
    from curate.tokenizers.tiktoken_bpe import TekkenEncoder

    return list(TekkenEncoder.load(resolve_source(str(_tekken())), 1).special)


def _tekken() -> Path:
    from benchmarks.tokenize_convert import mistral_file

    return mistral_file("tekken_240911.json")


def tokenizer_folders() -> tuple[Path, Path]:
    """Mistral's tekken 240911 with the template: the file itself for curate, and the same
    tokenizer as a tokenizer.json (its 1000 control tokens as special added tokens) for
    transformers, which has no tekken loader."""
    from benchmarks.tokenize_convert import prepare

    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "chat_template": TEMPLATE}  # fmt: skip
    curate_folder, hf_folder = WORK / "chat" / "tekken", WORK / "chat" / "tokenizer-json"
    for folder in (curate_folder, hf_folder):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    original, tokenizer_json = prepare("tekken", WORK / "tok")
    if not (curate_folder / "tekken.json").exists():
        shutil.copyfile(original, curate_folder / "tekken.json")
    if not (hf_folder / "tokenizer.json").exists():
        shutil.copyfile(tokenizer_json, hf_folder / "tokenizer.json")
    return curate_folder, hf_folder


# -- the contenders -----------------------------------------------------------------------


def digest(lengths: np.ndarray, ids: np.ndarray, masks: np.ndarray) -> str:
    h = xxhash.xxh3_128()
    h.update(np.ascontiguousarray(lengths, dtype=np.uint32).tobytes())
    h.update(np.ascontiguousarray(ids, dtype=np.uint32).tobytes())
    h.update(np.ascontiguousarray(masks, dtype=np.uint8).tobytes())
    return h.hexdigest()


def digest_shards(paths: list[Path], mask_column: str) -> tuple[str, int]:
    lengths, ids, masks = [], [], []
    for path in paths:
        with pa.memory_map(str(path)) as src:
            table = pa.ipc.open_stream(src).read_all()
        for chunk in table.column("input_ids").chunks:
            offsets = chunk.offsets.to_numpy()
            lengths.append(np.diff(offsets))
            ids.append(chunk.flatten().to_numpy())
        masks += [c.flatten().to_numpy() for c in table.column(mask_column).chunks]
    cat = np.concatenate
    return digest(cat(lengths), cat(ids), cat(masks)), int(sum(map(len, ids)))


def run_curate(corpus: Path, tokenizer: Path, out: Path, log: Path) -> tuple[Measurement, str, int]:
    recipe = {
        "name": "chat",
        "inputs": [str(corpus / "*.jsonl")],
        "id_field": "id",
        "chat": {"shape": "messages"},
        "stages": [{"chat_template": {"source": str(tokenizer), "mask": "loss_mask"}}],
        "output": {"root": str(out), "shard_size": "256MB", "rejected": False},
        "engine": {"kind": "local", "workers": 2},
    }
    m, version = run_curate_recipe(recipe, out, log)
    manifest = json.loads((version / "manifest.json").read_text())
    removed = manifest["counts"].get("removed") or {}
    assert not any(removed.values()), removed
    found, n = digest_shards([version / s["path"] for s in manifest["shards"]], "loss_mask")
    return m, found, n


def run_hf(corpus: Path, tokenizer: Path, out: Path, log: Path) -> tuple[Measurement, str, int]:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [sys.executable, "-m", "benchmarks.chat_template_hf", "--corpus", str(corpus),
           "--tokenizer", str(tokenizer), "--out", str(out / "out")]  # fmt: skip
    env = {**os.environ, "HF_HOME": str(out / "hf-home"), "HF_DATASETS_CACHE": str(out / "cache")}
    m = run_measured(cmd, log, env=env)
    found, n = digest_shards(sorted((out / "out").glob("data-*.arrow")), "assistant_masks")
    return m, found, n


CONTENDERS = {"curate": run_curate, "HF datasets": run_hf}


# -- the report ---------------------------------------------------------------------------


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("curate", "transformers", "tokenizers", "datasets", "jinja2", "pyarrow"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "-"
    return out


def report(
    results: list[Result], commands: list[str], corpus_info: dict[str, int], reads: str
) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    lines = [
        "# chat_template benchmark",
        "",
        f"Commands: `{' ; '.join(commands)}`",
        "",
        f"curate commit {commit}; {platform.node()}, {os.cpu_count()} cores; "
        + ", ".join(f"{k} {v}" for k, v in versions().items()),
        "",
        f"Corpus: {corpus_info['bytes'] / 1e6:.1f} MB of JSONL, {corpus_info['conversations']:,} "
        f"conversations from {corpus_info['documents']:,} documents (man pages, /usr/share/doc, "
        "Python sources). Template: Mistral [INST] style (system prompt before the first user "
        "message) with `{% generation %}`; tokenizer: Mistral tekken 240911 (curate reads "
        f"{reads}; transformers the same tokenizer as a tokenizer.json).",
        "",
    ]
    by_size: dict[int, dict[str, list[Result]]] = {}
    for r in results:
        by_size.setdefault(r.size_mb, {}).setdefault(r.contender, []).append(r)
    verdicts = []
    for size, by_name in by_size.items():
        med = {n: statistics.median(r.mb_s for r in rs) for n, rs in by_name.items()}
        cpu = {n: statistics.median(r.mb_cpu_s for r in rs) for n, rs in by_name.items()}
        digests = {r.digest for rs in by_name.values() for r in rs}
        lines += [
            f"## {size} MB",
            "",
            "| contender | MB/s per round | MB/s (median) | curate is | MB per CPU-s (median) "
            "| curate is (CPU) | peak memory, tree (MiB) | tokens | load avg | foreign load "
            "| output |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, rs in by_name.items():
            per = ", ".join(f"{r.mb_s:.2f}" for r in rs)
            ratio = f"{med['curate'] / med[name]:.2f}x" if name != "curate" else "-"
            cratio = f"{cpu['curate'] / cpu[name]:.2f}x" if name != "curate" else "-"
            peak = max(r.peak_tree_mib for r in rs)
            load = statistics.median(r.load for r in rs)
            foreign = statistics.median(r.foreign_load for r in rs)
            same = "same" if len(digests) == 1 else rs[0].digest[:12]
            lines.append(
                f"| {name} | {per} | {med[name]:.2f} | {ratio} | {cpu[name]:.2f} | {cratio} "
                f"| {peak:.0f} | {rs[0].tokens:,} | {load:.2f} | {foreign:.2f} | {same} |"
            )
        lines.append("")
        if len(digests) != 1:
            verdicts.append(f"FAIL {size} MB: the contenders' ids or masks differ")
        if "HF datasets" in med and "curate" in med:
            ratio = med["curate"] / med["HF datasets"]
            ok = "ok  " if ratio >= TARGET else "MISS"
            verdicts.append(f"{ok} {size} MB: curate / HF datasets = {ratio:.2f}x wall "
                            f"(target >= {TARGET}x), "
                            f"{cpu['curate'] / cpu['HF datasets']:.2f}x CPU")  # fmt: skip
    lines += ["## Verdicts", "", "```", *verdicts, "```", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=60, help="MB of JSONL conversations")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", action="append", choices=list(CONTENDERS))
    parser.add_argument("--curate-tokenizer", choices=["tekken", "tokenizer.json"],
                        default="tekken", help="what curate reads: the tekken file (its "
                        "fastest exact encoder, tiktoken) or the same tokenizer.json as "
                        "transformers (tokenizers, with offsets)")  # fmt: skip
    parser.add_argument("--quiet-load", type=float, default=0.3,
                        help="wait (up to 60 s) until other processes use at most this many "
                        "cores before each run")  # fmt: skip
    args = parser.parse_args()
    if args.size < 50:
        raise SystemExit("the benchmark needs at least 50 MB of conversations")
    corpus = build_corpus(args.size)
    corpus_info = json.loads((corpus / "corpus.json").read_text())
    curate_tokenizer, hf_tokenizer = tokenizer_folders()
    results_name = "chat_template"
    if args.curate_tokenizer == "tokenizer.json":
        curate_tokenizer, results_name = hf_tokenizer, "chat_template-tokenizer_json"
    results_json = ROOT / "results" / f"{results_name}.json"
    command = "python -m benchmarks.chat_template " + " ".join(sys.argv[1:])
    runs: list[Result] = []
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.time()

    def save() -> None:
        data = {"commands": [command], "corpus": corpus_info, "runs": [asdict(r) for r in runs]}
        results_json.write_text(json.dumps(data, indent=1))

    for rnd in range(args.rounds):
        for name, run in CONTENDERS.items():
            if args.only and name not in args.only:
                continue
            wait_for_quiet(args.quiet_load, 60)
            slug = name.split()[0].lower()
            tokenizer = curate_tokenizer if name == "curate" else hf_tokenizer
            m, found, n = run(
                corpus, tokenizer, WORK / "chat" / slug, logs / f"chat-{slug}-r{rnd}.log"
            )
            r = Result(args.size, name, rnd, m.wall_s, m.cpu_s, m.peak_tree_rss / MIB,
                       corpus_info["bytes"], found, n, os.getloadavg()[0],
                       m.foreign_load)  # fmt: skip
            runs.append(r)
            save()
            print(f"  r{rnd} {name:12s} {r.mb_s:6.2f} MB/s {r.mb_cpu_s:6.2f} MB/CPU-s "
                  f"{r.peak_tree_mib:6.0f} MiB  {found[:12]}", flush=True)  # fmt: skip
    reads = (
        "the tekken file, encoded by tiktoken"
        if results_name == "chat_template"
        else ("the same tokenizer.json, encoded by tokenizers")
    )
    text = report(runs, [command], corpus_info, reads)
    (ROOT / "results" / f"{results_name}.md").write_text(text)
    print(text)
    print(f"({time.time() - started:.0f} s)")
    if any(line.startswith("FAIL") for line in text.splitlines()):
        sys.exit(1)


if __name__ == "__main__":
    main()
