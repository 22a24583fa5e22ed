"""The benchmark n-grams that count as evidence of contamination, built once per worker.

Each benchmark is a local JSONL or Parquet file; every listed field of every row is a
text (a list field, such as answer choices, gives one text per element), and a row is
one benchmark *item*. An n-gram found in more than `max_items` items of all benchmarks
together is a template or a commonplace, not evidence, and so is any n-gram of the
`ignore` files (licence text, boilerplate); both are dropped from the set. Items shorter
than n words have no n-grams and are counted as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate.decontam.words import ngram_keys, normalized_words
from curate.errors import CurateError
from curate.sorted_sets import distinct_sorted, sorted_unique, unique_pairs


@dataclass
class BenchmarkFile:
    name: str
    path: Path
    fields: list[str]


_FILTER_BITS = 27  # a 16 MB bit array: about 1.5% false candidates for 2 million n-grams


@dataclass
class NGramIndex:
    """Sorted unique n-gram keys and, per key, the bitmask of benchmarks it comes from.

    A bit array over the keys' top bits answers "certainly not a benchmark n-gram" for
    almost every n-gram of a corpus at the cost of one memory read; only the rest are
    looked up in the sorted keys.
    """

    keys: np.ndarray
    masks: np.ndarray
    names: list[str]
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    bits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    def __post_init__(self) -> None:
        bits = np.zeros(1 << (_FILTER_BITS - 3), np.uint8)
        slot = self.keys >> np.uint64(64 - _FILTER_BITS)
        np.bitwise_or.at(
            bits, slot >> np.uint64(3), np.left_shift(1, slot & np.uint64(7)).astype(np.uint8)
        )
        self.bits = bits

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The benchmark bitmask of each key (0: not a benchmark n-gram)."""
        out = np.zeros(len(keys), np.uint64)
        if len(self.keys) == 0 or len(keys) == 0:
            return out
        slot = keys >> np.uint64(64 - _FILTER_BITS)
        maybe = np.flatnonzero(
            (self.bits[slot >> np.uint64(3)] >> (slot & np.uint64(7)).astype(np.uint8)) & 1
        )
        if len(maybe):
            at = np.minimum(np.searchsorted(self.keys, keys[maybe]), len(self.keys) - 1)
            out[maybe] = np.where(self.keys[at] == keys[maybe], self.masks[at], np.uint64(0))
        return out


def read_items(bench: BenchmarkFile) -> tuple[pa.Array, np.ndarray]:
    """Every text of a benchmark file and the row (item) it belongs to."""
    path = bench.path
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        elif path.suffix in (".jsonl", ".json", ".ndjson"):
            import pyarrow.json as pj

            table = pj.read_json(path)
        else:
            raise CurateError(f"decontaminate: {path}: use a .jsonl or .parquet benchmark file")
    except (OSError, pa.ArrowInvalid) as exc:
        raise CurateError(f"decontaminate: cannot read benchmark {path}: {exc}") from None
    texts: list[pa.Array] = []
    items: list[np.ndarray] = []
    for name in bench.fields:
        if name not in table.column_names:
            raise CurateError(
                f"decontaminate: benchmark {bench.name} ({path}) has no field '{name}'; "
                f"fields: {', '.join(table.column_names)}"
            )
        col = table.column(name).combine_chunks()
        rows = np.arange(len(col), dtype=np.int64)
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            rows = np.repeat(rows, pa.compute.list_value_length(col).fill_null(0).to_numpy())
            col = col.flatten()
        texts.append(col.cast(pa.string()))
        items.append(rows)
    return pa.concat_arrays(texts), np.concatenate(items)


def build_index(
    benchmarks: list[BenchmarkFile], ignore: list[Path], n: int, max_items: int
) -> NGramIndex:
    if len(benchmarks) > 64:
        raise CurateError("decontaminate: at most 64 benchmarks per stage")
    all_keys, all_items, all_bench = [], [], []
    stats: dict[str, dict[str, int]] = {}
    item_base = 0
    for b, bench in enumerate(benchmarks):
        texts, items = read_items(bench)
        w = normalized_words(texts)
        keys, pos = ngram_keys(w, n)
        text_of = np.repeat(np.arange(len(w.counts)), w.counts)[pos]
        item = items[text_of] + item_base
        n_items = int(items.max()) + 1 if len(items) else 0
        with_grams = int(np.count_nonzero(np.bincount(items[text_of], minlength=n_items)))
        stats[bench.name] = {"items": n_items, "items_shorter_than_n": n_items - with_grams}
        item_base += n_items
        all_keys.append(keys)
        all_items.append(item)
        all_bench.append(np.full(len(keys), b, np.uint64))
    keys = np.concatenate(all_keys) if all_keys else np.zeros(0, np.uint64)
    items = np.concatenate(all_items) if all_items else np.zeros(0, np.int64)
    bench_ix = np.concatenate(all_bench) if all_bench else np.zeros(0, np.uint64)
    # items per key (each item once), to drop the n-grams too common to be evidence
    pair_keys, _ = unique_pairs(keys, items)
    uniq, item_counts = np.unique(pair_keys, return_counts=True)
    common = uniq[item_counts > max_items]
    boiler = np.zeros(0, np.uint64)
    for path in ignore:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CurateError(f"decontaminate: cannot read ignore file {path}: {exc}") from None
        boiler = np.concatenate([boiler, ngram_keys(normalized_words(pa.array([text])), n)[0]])
    drop = sorted_unique(np.concatenate([common, boiler]))
    keep = ~np.isin(keys, drop)
    keys, bench_ix = keys[keep], bench_ix[keep]
    order = np.argsort(keys, kind="stable")
    keys, bench_ix = keys[order], bench_ix[order]
    uniq_keys = distinct_sorted(keys)  # sorted just above
    masks = np.zeros(len(uniq_keys), np.uint64)
    group = np.searchsorted(uniq_keys, keys)
    np.bitwise_or.at(masks, group, np.left_shift(np.uint64(1), bench_ix))
    for b, bench in enumerate(benchmarks):
        stats[bench.name]["ngrams"] = int(((masks >> np.uint64(b)) & np.uint64(1)).sum())
    stats["_all"] = {"too_common": len(common), "ignored": len(sorted_unique(boiler))}
    return NGramIndex(uniq_keys, masks, [b.name for b in benchmarks], stats)
