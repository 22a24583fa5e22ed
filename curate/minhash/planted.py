"""A corpus with planted near-duplicates and its exact ground truth, to measure a setting.

`planted_corpus` writes unrelated base documents and, from some of them, variants made the
ways near-duplicates arise: scattered word edits, an inserted passage, reordered
paragraphs, a boilerplate header, a licence with another copyright line, edits of edits.
The order is shuffled, so a variant may come before its original. `ground_truth` computes
the exact Jaccard similarity of every pair that shares a shingle (every other pair has 0),
by brute force over Python sets of the same shingles the stage uses; `score` turns a set
of removed ids into recall, precision and F1 as issue 3 defines them.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from curate.minhash.shingles import reference_shingles

HEADERS = [
    "This page is part of the public documentation archive and is provided as is without "
    "warranty of any kind please report errors to the maintainers of the archive",
    "Terms of use apply to all content on this site by reading further you agree to the "
    "terms and to the privacy notice published on the home page",
]
LICENCE = (
    "Permission is hereby granted free of charge to any person obtaining a copy of this "
    "software and associated documentation files to deal in the software without "
    "restriction including without limitation the rights to use copy modify merge publish "
    "distribute sublicense and or sell copies of the software and to permit persons to whom "
    "the software is furnished to do so subject to the following conditions the above "
    "copyright notice and this permission notice shall be included in all copies or "
    "substantial portions of the software the software is provided as is without warranty "
    "of any kind express or implied including but not limited to the warranties of "
    "merchantability fitness for a particular purpose and noninfringement"
)


@dataclass
class Planted:
    docs: list[dict[str, str]]  # id, text, kind (base, edit, insert, ...), of (origin id)
    pairs: dict[tuple[int, int], float] = field(default_factory=dict)  # exact J > 0


def _vocabulary(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyzäöüéñ"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(n)]


def planted_corpus(bases: int = 300, seed: int = 3) -> Planted:
    """About 2.3 * `bases` documents, a little over half of them variants of a base."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 5000)
    docs: list[dict[str, str]] = []

    def add(words: list[str], kind: str, of: str = "") -> str:
        doc_id = f"{kind}-{len(docs)}"
        docs.append({"id": doc_id, "text": " ".join(words), "kind": kind, "of": of})
        return doc_id

    def edited(words: list[str], share: float) -> list[str]:
        out = list(words)
        for i in rng.sample(range(len(out)), max(1, int(len(out) * share))):
            out[i] = rng.choice(vocab)
        return out

    base_words = []
    for _ in range(bases):
        words = [rng.choice(vocab) for _ in range(rng.randint(40, 400))]
        base_words.append((add(words, "base"), words))
    for base_id, words in base_words:
        kind = rng.choice(["edit", "edit", "insert", "reorder", "header", "chain", "none"])
        if kind == "edit":
            for _ in range(rng.randint(1, 3)):
                add(edited(words, rng.uniform(0.0, 0.06)), "edit", base_id)
        elif kind == "insert":
            at = rng.randint(0, len(words))
            extra = [rng.choice(vocab) for _ in range(rng.randint(1, max(1, len(words) // 6)))]
            add(words[:at] + extra + words[at:], "insert", base_id)
        elif kind == "reorder":
            cuts = sorted(rng.sample(range(1, len(words)), 3))
            paras = [words[i:j] for i, j in zip([0, *cuts], [*cuts, len(words)], strict=True)]
            rng.shuffle(paras)
            add([w for p in paras for w in p], "reorder", base_id)
        elif kind == "header":
            add(rng.choice(HEADERS).split() + words, "header", base_id)
        elif kind == "chain":
            first = edited(words, rng.uniform(0.01, 0.03))
            first_id = add(first, "chain", base_id)
            add(edited(first, rng.uniform(0.01, 0.03)), "chain", first_id)
    # unrelated documents behind one shared header: similar only in their first shingles
    for _ in range(bases // 5):
        words = [rng.choice(vocab) for _ in range(rng.randint(40, 120))]
        add(HEADERS[0].split() + words, "shared_header")
    # a licence with another copyright line each time
    for year in range(bases // 10):
        holder = " ".join(rng.choice(vocab) for _ in range(rng.randint(2, 5)))
        add(f"Copyright {1990 + year} {holder}. {LICENCE}".split(), "licence")
    # distractors below the threshold: heavier edits
    for base_id, words in rng.sample(base_words, bases // 6):
        add(edited(words, rng.uniform(0.08, 0.2)), "distractor", base_id)
    for text in ["", "   ", "\n", "short", "two words"]:
        docs.append({"id": f"tiny-{len(docs)}", "text": text, "kind": "tiny", "of": ""})
    rng.shuffle(docs)
    return Planted(docs)


def ground_truth(docs: list[dict[str, str]], size: int = 5, lowercase: bool = True) -> Planted:
    """Exact Jaccard similarity of every pair of documents that share a shingle."""
    sets = [set(reference_shingles(d["text"], "word", size, lowercase)) for d in docs]
    holders: dict[bytes, list[int]] = defaultdict(list)
    for i, s in enumerate(sets):
        for sh in s:
            holders[sh].append(i)
    candidates: set[tuple[int, int]] = set()
    for group in holders.values():
        if len(group) > 1:
            candidates.update((a, b) for k, a in enumerate(group) for b in group[k + 1 :])
    pairs = {(a, b): len(sets[a] & sets[b]) / len(sets[a] | sets[b]) for a, b in candidates}
    return Planted(docs, {k: v for k, v in pairs.items() if v > 0})


def score(
    truth: Planted, removed: set[str], threshold: float = 0.8, partner: float = 0.7
) -> dict[str, float]:
    """Recall over the true duplicates (members of a connected component of pairs with exact
    J >= threshold, other than its first document) and precision over the removed documents
    (share having some document with exact J >= partner), with F1."""
    n = len(truth.docs)
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for (a, b), j in truth.pairs.items():
        if j >= threshold:
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)
    duplicates = {truth.docs[i]["id"] for i in range(n) if find(i) != i}
    has_partner = {
        truth.docs[i]["id"] for pair, j in truth.pairs.items() if j >= partner for i in pair
    }
    recall = len(duplicates & removed) / len(duplicates) if duplicates else 1.0
    precision = len(removed & has_partner) / len(removed) if removed else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "duplicates": len(duplicates),
        "removed": len(removed),
        "recall": recall,
        "precision": precision,
        "f1": f1,
    }
