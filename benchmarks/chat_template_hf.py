"""The HF datasets contender of the chat_template benchmark, run as its own process.

    python -m benchmarks.chat_template_hf --corpus D --tokenizer FOLDER --out O

`load_dataset('json')` over the corpus, `.map(batched=True, num_proc=2)` calling the
tokenizer's own `apply_chat_template(tokenize=True, return_dict=True,
return_assistant_tokens_mask=True)` on each batch of conversations, then `save_to_disk`:
what a fine-tuning script written with Hugging Face's libraries does.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--num-proc", type=int, default=2)
    args = parser.parse_args()
    import datasets
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(args.tokenizer))
    files = [str(p) for p in sorted(args.corpus.glob("*.jsonl"))]
    ds = datasets.load_dataset("json", data_files=files, split="train")

    def render(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        out = tok.apply_chat_template(
            batch["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        return {"input_ids": out["input_ids"], "assistant_masks": out["assistant_masks"]}

    ds = ds.map(render, batched=True, num_proc=args.num_proc, remove_columns=ds.column_names)
    ds.save_to_disk(str(args.out))


if __name__ == "__main__":
    main()
