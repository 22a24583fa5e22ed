"""Elastic resume: stop at any step with one world size, resume with another (or another
number of DataLoader workers), and across all ranks the samples seen are exactly those of
an uninterrupted run: none repeated, none skipped.

Every rank's batches are laid out as an uninterrupted run reads the global stream (step,
then place in the batch, then rank), and that sequence must be the stream itself. The
two property tests together took 43-59 s on this 2-core machine with other jobs running
(mostly forking DataLoader workers, ~0.35 s per 2-worker loader). Every reader of a version
comes from one `Tokens`, opened once per version and reused, as a trainer's rank opens its
data once: the readers are what is tested, not opening.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import REPO, corpus, write_jsonl, write_recipe

import curate
from curate.errors import CurateError
from curate.loader import Permutation, open_tokens

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

from curate.loader import data_loader  # noqa: E402

TOKENIZER = REPO / "sample_data" / "tokenizer"
WORLDS = [1, 2, 3, 4, 5, 6, 7, 8, 12]
BATCH = 2


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("resume")
    write_jsonl(root / "data" / "a.jsonl", corpus(30, dup_every=0))
    plain = curate.run(
        write_recipe(root, name="plain", stages=[{"tokenize": {"source": str(TOKENIZER)}}])
    )
    seq_len = open_tokens(plain.path).num_tokens // 22
    packed = [{"tokenize": {"source": str(TOKENIZER), "pack": {"seq_len": seq_len}}}]
    packed_version = curate.run(write_recipe(root, name="packed", stages=packed))
    chat_root = root / "chat"
    chat_root.mkdir()
    chat = curate.run(
        write_recipe(
            chat_root,
            name="chat",
            inputs=[str(REPO / "sample_data" / "instruct" / "*.jsonl")],
            chat={"shape": "alpaca"},
            stages=[
                {"chat_template": {"source": str(REPO / "sample_data" / "chat" / "tokenizer")}}
            ],
        )
    )
    return {
        "plain": plain.path,
        "packed": packed_version.path,
        "chat": chat.path,
        "mixture": mixture(root / "mix"),
    }


def mixture(folder: Path) -> Path:
    """A mixture of three packed sources, 0.6 / 0.3 / 0.1 of 720 tokens: 45 samples of 16."""
    sources = []
    for name, docs, weight in (("web", 8, 0.6), ("code", 6, 0.3), ("docs", 4, 0.1)):
        write_jsonl(folder / "data" / name / "a.jsonl", corpus(docs, dup_every=0, prefix=name))
        recipe = {
            "name": name,
            "inputs": [f"data/{name}/*.jsonl"],
            "id_field": "id",
            "stages": [{"tokenize": {"source": str(TOKENIZER), "pack": {"seq_len": 16}}}],
            "output": {"root": "out", "fsync": False},
            "engine": {"workers": 1},
        }
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
        sources.append({"recipe": f"{name}.yaml", "weight": weight, "max_epochs": 8})
    spec = {"name": "mix", "budget": 720, "seed": 3, "sources": sources}
    spec["output"] = {"root": "out", "fsync": False}
    (folder / "mixture.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return Path(curate.prepare(str(folder / "mixture.yaml")).path)


OPENED: dict[Path, Any] = {}
"""Each version opened once, as each rank of a trainer opens it once: the property tests
make ~14,000 readers, and opening the version for each (manifest, files checked, tables
mapped) was most of their time."""


@pytest.fixture(scope="module", autouse=True)
def _release_opened() -> Any:
    yield
    for tokens in OPENED.values():
        tokens.version.release()
    OPENED.clear()


def reader(path: Path, kind: str, rank: int, world: int) -> Any:
    tokens = OPENED.get(path)
    if tokens is None:
        tokens = OPENED[path] = open_tokens(path)
    if kind == "plain":
        return tokens.blocks(tokens.num_tokens // 21, seed=5, rank=rank, world_size=world, epochs=2)
    if kind in ("packed", "mixture"):
        epochs = 2 if kind == "packed" else 1  # a mixture's repeats are in its index
        return tokens.blocks(seed=5, rank=rank, world_size=world, epochs=epochs)
    return tokens.rows(["input_ids"], seed=5, rank=rank, world_size=world)


def key(sample: Any) -> tuple[int, ...]:
    ids = sample["input_ids"] if isinstance(sample, dict) else sample
    return tuple(int(t) for t in ids)


def collate(batch: list[Any]) -> list[tuple[int, ...]]:
    return [key(s) for s in batch]


def steps(loaders: list[Any], limit: int | None = None) -> tuple[list[tuple[int, ...]], list[Any]]:
    """Run every rank in lockstep; the samples in stream order, and the state after each step."""
    its = [iter(loader) for loader in loaders]
    out: list[tuple[int, ...]] = []
    states = [loaders[0].state_dict()]
    while limit is None or len(states) <= limit:
        try:
            batches = [next(it) for it in its]
        except StopIteration:
            break
        for j in range(len(batches[0])):  # every rank holds the same number
            out.extend(batch[j] for batch in batches)
        assert len({str(loader.state_dict()) for loader in loaders}) == 1  # one position
        states.append(loaders[0].state_dict())
    return out, states


def loaders(path: Path, kind: str, world: int, **kwargs: Any) -> list[Any]:
    return [
        data_loader(reader(path, kind, r, world), batch_size=BATCH, collate_fn=collate, **kwargs)
        for r in range(world)
    ]


def test_resume_at_every_step_with_every_world_size(versions: dict[str, Path]) -> None:
    for kind, path in versions.items():
        stream = [key(s) for s in reader(path, kind, 0, 1)]
        assert len(stream) >= 30  # several steps at every world size but 12
        if kind == "mixture":  # one epoch is the mixture's samples, in index order
            record = open_tokens(path).version.manifest["mixture"]
            assert len(stream) == sum(s["samples"] for s in record["sources"])
        for first in WORLDS:
            run, states = steps(loaders(path, kind, first))
            assert run == stream[: len(run)] and len(stream) - len(run) < first
            for step, state in enumerate(states):
                assert state["consumed"] == min(step * BATCH * first, len(run))
                for second in WORLDS:
                    resumed = loaders(path, kind, second)
                    for loader in resumed:
                        loader.load_state_dict(state)
                    rest, _ = steps(resumed)
                    done = state["consumed"]
                    assert stream[done : done + len(rest)] == rest, (kind, first, step, second)
                    assert len(stream) - done - len(rest) < second  # only the uneven end


def test_sampled_resumes_with_workers_and_prefetching(versions: dict[str, Path]) -> None:
    """Workers prefetch batches the main process has not taken: the position counts only
    what left the DataLoader, and the resumed run may use another number of workers."""
    pick = random.Random(22)
    for _ in range(20):
        kind = pick.choice(sorted(versions))
        first, second = pick.choice([2, 3, 8]), pick.choice([1, 3, 6, 12])
        path = versions[kind]
        stream = [key(s) for s in reader(path, kind, 0, 1)]
        step = pick.randrange(1, len(stream) // (BATCH * first) + 1)
        run, states = steps(loaders(path, kind, first, num_workers=2, prefetch_factor=2), step)
        assert run == stream[: len(run)] and states[-1]["consumed"] == len(run)
        workers = pick.choice([0, 1, 2])
        resumed = loaders(path, kind, second, num_workers=workers)
        for loader in resumed:
            loader.load_state_dict(states[-1])
        rest, _ = steps(resumed)
        assert run + rest == stream[: len(run) + len(rest)], (kind, first, step, second, workers)
        assert len(stream) - len(run) - len(rest) < second


def test_the_old_per_rank_start_is_refused_with_the_conversion(versions: dict[str, Path]) -> None:
    tokens = open_tokens(versions["plain"])
    with pytest.raises(
        CurateError, match=r"pass position=start \* world_size \(here position=15\)"
    ):
        tokens.blocks(16, rank=1, world_size=3, start=5)
    with pytest.raises(CurateError, match="position=start"):
        tokens.rows(start=0)
    blocks = tokens.blocks(16, seed=1)
    with pytest.raises(CurateError, match="counts one rank's samples"):
        blocks.load_state_dict({"position": 4, "seed": 1, "epoch": 0})
    with pytest.raises(CurateError, match="samples per epoch"):
        blocks.load_state_dict({**tokens.blocks(32, seed=1).state_dict(), "consumed": 2})


class Interleaved:
    """A mixture-like order: not a permutation, samples repeated, a different length per
    epoch than the reader holds; seeded by the epoch."""

    def __init__(self, n: int) -> None:
        self.n, self.samples_per_epoch = n, n + n // 2

    def epoch_order(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([9, epoch])
        return np.concatenate([rng.permutation(self.n), rng.permutation(self.n)[: self.n // 2]])


def test_another_sample_order_resumes_the_same_way(versions: dict[str, Path]) -> None:
    """A mixture's interleaved index plugs in as a SampleOrder: same striding, same position."""
    tokens = open_tokens(versions["packed"])
    order = Interleaved(len(tokens.blocks()))

    def make(world: int) -> list[Any]:
        return [
            data_loader(
                tokens.blocks(rank=r, world_size=world, epochs=2, order=order),
                batch_size=BATCH,
                collate_fn=collate,
            )
            for r in range(world)
        ]

    stream = [key(s) for s in tokens.blocks(epochs=2, order=order)]
    assert len(stream) == 2 * order.samples_per_epoch
    for first, second in [(8, 6), (8, 12), (3, 5), (1, 7)]:
        run, states = steps(make(first))
        assert run == stream[: len(run)]
        for state in states:
            resumed = make(second)
            for loader in resumed:
                loader.load_state_dict(state)
            rest, _ = steps(resumed)
            done = state["consumed"]
            assert stream[done : done + len(rest)] == rest
            assert len(stream) - done - len(rest) < second
    with pytest.raises(CurateError, match="names sample"):
        tokens.blocks(order=Permutation(order.n + 1, seed=0, shuffle=False))[order.n]
