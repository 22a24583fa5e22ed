"""`curate mix`: a mixture version from real tokenized versions, its shares in every prefix,
its achieved tokens and epochs, hard links instead of copies, its refusals, and `verify`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import flip_byte, sealed, writable
from mix_fixtures import mixture_file, source_recipe

import curate
from curate.errors import CurateError
from curate.mix.prepare import is_mixture_file, prepare
from curate.mix.schedule import interleave, prefix_deviation
from curate.mix.spec import Mixture
from curate.output.shards import read_stream
from curate.verify import verify

THREE = [
    {"recipe": "web.yaml", "weight": 0.9, "max_epochs": 4},
    {"recipe": "code.yaml", "weight": 0.09},
    {"recipe": "docs.yaml", "weight": 0.01},
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mix")
    for name, docs in (("web", 300), ("code", 120), ("docs", 60)):
        source_recipe(root, name, docs)
    return root


@pytest.fixture(scope="module")
def mixed(folder: Path) -> curate.Version:
    return prepare(mixture_file(folder, THREE))


def curate_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(curate.__file__).parent.parent)}
    return subprocess.run([sys.executable, "-m", "curate.cli", *args], capture_output=True,
                          text=True, env=env, cwd=cwd)  # fmt: skip


def index_of(version: curate.Version) -> tuple[np.ndarray, np.ndarray]:
    table = read_stream(version.path / "index.arrow")
    return table.column("source").to_numpy(), table.column("row").to_numpy()


def test_every_prefix_holds_each_share_to_one_sample(mixed: curate.Version) -> None:
    record = mixed.manifest["mixture"]
    sources, _ = index_of(mixed)
    counts = [s["samples"] for s in record["sources"]]
    assert counts == [900, 90, 10]  # 16,000 tokens of 16-token rows at 0.9 / 0.09 / 0.01
    n = np.arange(1, len(sources) + 1)
    for k, count in enumerate(counts):
        held = np.cumsum(sources == k)
        assert np.all(np.abs(held - n * count / len(sources)) <= 1.0)
    assert record["max_prefix_deviation"] < 1.0
    assert sources[:100].tolist().count(2) == 1  # the 1% source is met in the first 100


def test_the_interleaving_bound_holds_for_many_sources_and_weights() -> None:
    rng = np.random.default_rng(5)
    for _ in range(300):
        counts = [int(c) for c in rng.integers(1, 300, int(rng.integers(1, 9)))]
        order = interleave(counts)
        assert np.bincount(order, minlength=len(counts)).tolist() == counts
        assert prefix_deviation(order, counts) < 1.0


def test_achieved_tokens_and_epochs_are_in_the_manifest(mixed: curate.Version) -> None:
    record = mixed.manifest["mixture"]
    _, rows = index_of(mixed)
    sources, _ = index_of(mixed)
    for k, s in enumerate(record["sources"]):
        assert abs(s["tokens"] - s["target_tokens"]) <= 16  # to one 16-token sample
        assert s["epochs"] == pytest.approx(s["samples"] / s["rows"], abs=1e-6)
        assert s["dataset"] == ["web", "code", "docs"][k] and len(s["fingerprint"]) == 64
        table = curate.open(Path(s["path"])).to_arrow()
        assert set(table.column("num_tokens").to_numpy()[rows[sources == k]]) == {16}
    assert record["sources"][0]["epochs"] > 1  # web is repeated: its cap of 4 allows it
    assert mixed.manifest["tokens"] == record["tokens"] == 16_000


def test_shards_are_hard_links_inside_the_folder(mixed: curate.Version) -> None:
    for s in mixed.manifest["mixture"]["sources"]:
        source = Path(s["path"])
        for path in s["shards"]:
            assert path.startswith(f"sources/{s['name']}/")
            ours, theirs = mixed.path / path, source / path.split("/", 2)[2]
            assert os.lstat(ours).st_ino == os.lstat(theirs).st_ino  # no copy of token data
    assert (mixed.path / "manifest.json").stat().st_mode & 0o222 == 0  # sealed like a version
    assert (mixed.path.parent / "LATEST").read_text().strip() == mixed.name


def test_verify_checks_the_mixture_and_its_sources(mixed: curate.Version, tmp_path: Path) -> None:
    assert verify(mixed.path) == []
    done = curate_cli("verify", str(mixed.path))
    assert done.returncode == 0 and "OK" in done.stdout
    source = Path(mixed.manifest["mixture"]["sources"][2]["path"])
    shard = source / "shards" / "tail-00000.arrow"
    writable(shard.parent)
    flip_byte(shard)  # one inode: the source's damage is the mixture's too
    try:
        problems = verify(mixed.path)
        assert any("sources/docs/shards/tail-00000.arrow" in p for p in problems)
        assert any(p.startswith("source docs (docs v1)") for p in problems)
    finally:
        flip_byte(shard)
        sealed(shard.parent)


def test_prepare_is_a_no_op_when_up_to_date(folder: Path, mixed: curate.Version) -> None:
    import time

    path = folder / "mixture.yaml"
    prepare(path)
    t0 = time.perf_counter()
    again = curate.prepare(path)  # the public hook sees a mixture file
    assert time.perf_counter() - t0 < 0.5
    assert again.path == mixed.path and again.manifest["mixture"]


def test_same_mixture_same_index_bytes(folder: Path, mixed: curate.Version) -> None:
    other = folder / "again"
    other.mkdir(exist_ok=True)
    sources = [{"name": s["name"], "dataset": s["dataset"], "version": s["version"],
                "fingerprint": s["fingerprint"], "root": "../out", "weight": w["weight"],
                **({"max_epochs": w["max_epochs"]} if "max_epochs" in w else {})}
               for s, w in zip(mixed.manifest["mixture"]["sources"], THREE, strict=True)]  # fmt: skip
    pinned = prepare(mixture_file(other, sources))
    assert pinned.path.parent.parent == other / "out"
    assert (pinned.path / "index.arrow").read_bytes() == (mixed.path / "index.arrow").read_bytes()


def test_cli_publishes_and_reports_target_vs_achieved(folder: Path, mixed: curate.Version) -> None:
    done = curate_cli("mix", str(folder / "mixture.yaml"))
    assert done.returncode == 0, done.stderr
    assert f"{mixed.path}: 1,000 samples, 16,000 tokens (budget 16,000)" in done.stdout
    assert "docs: docs v1" in done.stdout and "samples 10" in done.stdout


def test_a_wrong_fingerprint_is_refused(folder: Path, mixed: curate.Version) -> None:
    s = mixed.manifest["mixture"]["sources"][0]
    wrong = [{"dataset": "web", "version": "v1", "fingerprint": "0" * 64, "weight": 1}]
    path = mixture_file(folder, wrong, file="wrong.yaml", name="wrong")
    with pytest.raises(CurateError, match=r"wrong.yaml:\d+: sources\[0\]: web v1 has fingerpr"):
        prepare(path)
    assert s["fingerprint"] != "0" * 64
    assert not (folder / "out" / "wrong").exists() or not list(
        (folder / "out" / "wrong").glob("v*")
    )


def test_a_budget_past_the_epoch_caps_is_refused(folder: Path) -> None:
    sources = [{"recipe": "web.yaml", "weight": 0.5}, {"recipe": "docs.yaml", "weight": 0.5}]
    path = mixture_file(folder, sources, file="big.yaml", name="big")
    with pytest.raises(
        CurateError,
        match=r"source docs: the budget asks 8,000 tokens of it, .*"
        r"max_epochs is 1: lower the budget or its weight, or raise its max_",
    ):
        prepare(path)
    assert not list((folder / "out" / "big").glob("v*"))


@pytest.mark.parametrize(
    ("name", "tokenize", "message"),
    [
        ("long", {"seq_len": 32}, r"packed differently \(rows of 16 tokens vs rows of 32"),
        ("noeos", {"eos": False}, r"different BOS/EOS policies"),
        ("flat", {"seq_len": None}, r"packed differently \(rows of 16 tokens vs not packed\)"),
    ],
)
def test_sources_that_do_not_mix_are_refused(
    folder: Path, name: str, tokenize: dict[str, object], message: str
) -> None:
    source_recipe(folder, name, 40, **tokenize)
    sources = [{"recipe": "code.yaml", "weight": 1}, {"recipe": f"{name}.yaml", "weight": 1}]
    path = mixture_file(folder, sources, file=f"m-{name}.yaml", name=f"m-{name}", budget=320)
    with pytest.raises(CurateError, match=rf"m-{name}.yaml:\d+: sources\[1\]: cannot mix {name} "
                       rf"with code: {message}"):  # fmt: skip
        prepare(path)


def test_mixture_file_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: m\nbudget: -5\nsources:\n  - recipe: a.yaml\n    weight: 1\n    wieght: 2\n"
        "  - dataset: web\n    weight: 1\n"
    )
    with pytest.raises(CurateError) as err:
        Mixture.load(path)
    lines = str(err.value).splitlines()
    assert f"{path}:2: budget: input should be greater than 0" in lines
    assert f"{path}:6: sources[0].wieght: unknown key 'wieght'" in lines
    assert any(x.startswith(f"{path}:7: sources[1]: names no source") for x in lines), lines


def test_the_schema_file_is_the_models() -> None:
    from curate.schemas import mixture_schema

    repo = Path(curate.__file__).parent.parent
    on_disk = json.loads((repo / "schemas" / "mixture.schema.json").read_text())
    assert on_disk == mixture_schema()


def test_every_rank_may_prepare_at_once(folder: Path, mixed: curate.Version) -> None:
    sources = [{"recipe": "code.yaml", "weight": 2}, {"recipe": "docs.yaml", "weight": 1}]
    path = mixture_file(folder, sources, file="ranks.yaml", name="ranks", budget=960)
    code = "import sys, curate; print(curate.prepare(sys.argv[1]).path)"
    env = {**os.environ, "PYTHONPATH": str(Path(curate.__file__).parent.parent)}
    ranks = [subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]  # fmt: skip
    said = [p.communicate(timeout=300) for p in ranks]
    assert all(p.returncode == 0 for p in ranks), [err for _, err in said]
    assert {out.strip() for out, _ in said} == {str(folder / "out" / "ranks" / "v1")}
    assert [p.name for p in (folder / "out" / "ranks").glob("v*")] == ["v1"]
    assert verify(folder / "out" / "ranks" / "v1") == []


def test_open_tokens_reads_the_samples_in_index_order(mixed: curate.Version) -> None:
    from curate.loader import open_tokens

    tokens = open_tokens(mixed.path)
    assert len(tokens.sources) == 3  # the sources' read locks: gc leaves them
    sources, rows = index_of(mixed)
    record = mixed.manifest["mixture"]["sources"]
    tables = [curate.open(Path(s["path"])).to_arrow() for s in record]
    want = [tables[k].column("input_ids")[int(r)].values.to_numpy() for k, r in
            zip(sources[:50], rows[:50], strict=True)]  # fmt: skip
    blocks = tokens.blocks(16, shuffle=False)
    assert len(blocks) == 1000
    got = [blocks[i] for i in range(50)]
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    first = tokens.rows(["input_ids"], shuffle=False)
    assert np.array_equal(first[7]["input_ids"], want[7])
    with pytest.raises(CurateError, match=r"blocks\(8\): a mixture is read by its samples"):
        tokens.blocks(8)


def test_chat_mixed_with_text_is_refused(folder: Path) -> None:
    repo = Path(curate.__file__).parent.parent
    recipe = {
        "name": "chat",
        "inputs": [str(repo / "sample_data" / "chat" / "alpaca.jsonl")],
        "id_field": "id",
        "chat": {"shape": "alpaca"},
        "stages": [{"chat_template": {"source": str(repo / "sample_data/chat/tokenizer")}}],
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }
    (folder / "chat.yaml").write_text(json.dumps(recipe))
    sources = [{"recipe": "code.yaml", "weight": 1}, {"recipe": "chat.yaml", "weight": 1}]
    path = mixture_file(folder, sources, file="m-chat.yaml", name="m-chat", budget=64)
    with pytest.raises(CurateError, match=r"m-chat.yaml:\d+: sources\[1\]: cannot mix chat with "
                       r"code: chat holds chat records, code text"):  # fmt: skip
        prepare(path)


def test_different_tokenizers_are_refused(folder: Path) -> None:
    repo = Path(curate.__file__).parent.parent
    other = folder / "other-tokenizer"
    other.mkdir(exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (other / name).write_bytes((repo / "sample_data" / "tokenizer" / name).read_bytes())
    data = json.loads((other / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    data["added_tokens"].append({"id": len(vocab) + 50, "content": "<|extra|>", "special": True,
                                 "single_word": False, "lstrip": False, "rstrip": False,
                                 "normalized": False})  # fmt: skip
    (other / "tokenizer.json").write_text(json.dumps(data))
    source_recipe(folder, "retok", 40)
    retok = yaml_of(folder / "retok.yaml")
    retok["stages"][0]["tokenize"]["source"] = str(other)
    (folder / "retok.yaml").write_text(json.dumps(retok))
    sources = [{"recipe": "code.yaml", "weight": 1}, {"recipe": "retok.yaml", "weight": 1}]
    path = mixture_file(folder, sources, file="m-retok.yaml", name="m-retok", budget=320)
    with pytest.raises(CurateError, match=r"sources\[1\]: cannot mix retok with code: tokenized "
                       r"with different tokenizers"):  # fmt: skip
        prepare(path)


def yaml_of(path: Path) -> dict[str, object]:
    import yaml

    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def test_a_mixture_file_is_told_from_a_recipe_in_any_yaml_spelling(tmp_path: Path) -> None:
    """`curate.prepare(path)` asks first whether the file is a mixture; a recipe that holds
    neither word is not parsed for it, and one that holds both (a comment, the cache's
    budget) is parsed and is still a recipe."""
    cases = {
        "name: r\ninputs: [a.jsonl]\n": False,
        "# sources of the data\nname: r\ncache: {budget: 10GB}\n": False,
        "sources: [{dataset: a}]\nbudget: {tokens: 10}\n": True,
        '{"sources": [{"dataset": "a"}], "budget": {"tokens": 10}}\n': True,
        "sources: [unclosed\nbudget: 1\n": False,  # invalid YAML: the recipe loader says where
        "- sources\n- budget\n": False,
    }
    for i, (text, want) in enumerate(cases.items()):
        path = tmp_path / f"{i}.yaml"
        path.write_text(text)
        assert is_mixture_file(path) is want, text
    assert not is_mixture_file(tmp_path / "missing.yaml")
