"""Mistakes found after the recipe validates (an input, a tokenizer, the output folder) name
the recipe file, line and path, on one line, and nothing is written."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate.cli import main
from curate.errors import CurateError, recipe_part


def line_of(recipe: Path, text: str) -> int:
    """1-based line of the first recipe line containing `text`."""
    lines = recipe.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def fails(recipe: Path) -> str:
    result = CliRunner().invoke(main, ["run", str(recipe)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_missing_input_names_its_recipe_line(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    recipe = write_recipe(tmp_path, inputs=["data/a.jsonl", "data/typo.jsonl"])
    line = line_of(recipe, "data/typo.jsonl")
    message = fails(recipe)
    assert message.startswith(f"error: {recipe}:{line}: inputs[1]: input 'data/typo.jsonl'")
    assert not (tmp_path / "out").exists()


def test_glob_matching_nothing_and_empty_folder_name_their_lines(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    recipe = write_recipe(tmp_path, inputs=["data/*.jsonl", "data/*.parquet"])
    assert f"{recipe}:{line_of(recipe, '*.parquet')}: inputs[1]: " in fails(recipe)
    recipe = write_recipe(tmp_path, inputs=["empty"])
    message = fails(recipe)
    assert f"{recipe}:{line_of(recipe, '- empty')}: inputs[0]: " in message
    assert "no .txt or .md files" in message
    assert not (tmp_path / "out").exists()


def test_missing_tokenizer_names_its_stage_line(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    stages = [{"normalize": {}}, {"tokenize": {"source": "models/typo"}}]
    recipe = write_recipe(tmp_path, stages=stages)
    message = fails(recipe)
    line = line_of(recipe, "- tokenize")
    assert message.startswith(f"error: {recipe}:{line}: stages[1].tokenize: tokenizer ")
    assert "models/typo" in message
    assert not (tmp_path / "out").exists()


def test_output_root_that_cannot_be_created_names_output_root(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    (tmp_path / "a-file").write_text("in the way\n")
    recipe = write_recipe(tmp_path, output={"root": "a-file/out", "fsync": False})
    message = fails(recipe)
    line = line_of(recipe, "root: a-file/out")
    assert message.startswith(f"error: {recipe}:{line}: output.root: cannot create output folder")
    assert (tmp_path / "a-file").read_text() == "in the way\n"


def test_python_api_error_names_the_line_too(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, inputs=["nowhere/*.jsonl"])
    with pytest.raises(CurateError) as exc:
        curate.run(recipe)
    assert str(exc.value).startswith(f"{recipe}:{line_of(recipe, 'nowhere')}: inputs[0]: input ")


def test_a_dataset_folder_as_input_asks_for_a_version(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(6, dup_every=0))
    curate.run(write_recipe(tmp_path))
    (tmp_path / "next").mkdir()
    recipe = write_recipe(tmp_path / "next", name="next", inputs=["../out/t"])
    message = fails(recipe)
    shown = tmp_path / "out" / "t"  # outside the current folder: absolute
    assert f"input '{shown}' (from '../out/t') is a curate dataset folder (LATEST is v1)" in message
    assert message.endswith("name a version, e.g. '../out/t/v1'")


def test_a_split_dataset_folder_as_input_asks_for_a_split(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20, dup_every=0))
    curate.run(write_recipe(tmp_path, split={"validation": 0.2}))
    (tmp_path / "next").mkdir()
    for given in ("../out/t", "../out/t/v1"):
        message = fails(write_recipe(tmp_path / "next", name="next", inputs=[given]))
        assert message.endswith("e.g. '../out/t/v1/train'"), message
    version = curate.run(write_recipe(tmp_path / "next", name="next", inputs=["../out/t/v1/train"]))
    assert (
        version.counts["written"] == curate.open(tmp_path / "out" / "t").to_arrow("train").num_rows
    )


def test_an_error_keeps_its_recipe_part_across_processes() -> None:
    with pytest.raises(CurateError) as exc, recipe_part("inputs", 2):
        raise CurateError("input 'x' does not exist")
    copy = pickle.loads(pickle.dumps(exc.value))
    assert copy.at == ("inputs", 2) and str(copy) == "input 'x' does not exist"


def test_a_stage_message_is_not_prefixed_twice_with_the_stage_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CURATE_PII_KEY", raising=False)
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    recipe = write_recipe(tmp_path, stages=[{"pii": {"entities": {"EMAIL_ADDRESS": "hash"}}}])
    message = fails(recipe)
    line = line_of(recipe, "- pii")
    assert message.startswith(f"error: {recipe}:{line}: stages[0].pii: the hash action needs")


def test_a_missing_benchmark_file_is_named_plainly(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    bench = {"benchmarks": [{"name": "quiz", "path": "bench/quiz.jsonl"}]}
    recipe = write_recipe(tmp_path, stages=[{"decontaminate": bench}])
    message = fails(recipe)
    assert message.endswith(
        f"stages[0].decontaminate: cannot read {tmp_path / 'bench' / 'quiz.jsonl'}: "
        "No such file or directory"
    )


def test_inspect_filter_errors_name_the_line_too(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, inputs=["gone.jsonl"], stages=[{"filter_length": {}}])
    result = CliRunner().invoke(main, ["inspect-filter", str(recipe), "--stage", "filter_length"])
    assert result.exit_code == 2
    line = line_of(recipe, "gone.jsonl")
    assert result.stderr.startswith(f"error: {recipe}:{line}: inputs[0]: input 'gone.jsonl'")


@pytest.mark.skipif(not Path("/proc/sys").is_dir(), reason="needs Linux /proc")
def test_an_output_folder_that_is_not_curates_names_output_root(tmp_path: Path) -> None:
    # /proc exists and holds no curate datasets: refused before anything is tried (tests
    # here run as root, for whom permission bits do not stop anything)
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    recipe = write_recipe(tmp_path, name="sys", output={"root": "/proc", "fsync": False})
    message = fails(recipe)
    line = line_of(recipe, "root: /proc")
    assert message.startswith(
        f"error: {recipe}:{line}: output.root: /proc is not a curate output root: "
    )


@pytest.mark.skipif(not Path("/proc/sys").is_dir(), reason="needs Linux /proc")
def test_an_output_folder_that_takes_no_files_names_output_root(tmp_path: Path) -> None:
    # a marked root whose dataset folder leads to /proc/sys, where no file can be created
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".curate-root").write_text("")
    (tmp_path / "out" / "sys").symlink_to("/proc/sys")
    recipe = write_recipe(tmp_path, name="sys", output={"root": "out", "fsync": False})
    message = fails(recipe)
    line = line_of(recipe, "root: out")
    assert message.startswith(
        f"error: {recipe}:{line}: output.root: cannot write in output folder "
        f"{tmp_path / 'out' / 'sys'}: "
    )


def test_chat_records_in_parquet_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir()
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    pq.write_table(pa.table({"id": ["a"], "messages": [turns]}), tmp_path / "data" / "c.parquet")
    recipe = write_recipe(tmp_path, inputs=["data/c.parquet"], chat={"shape": "messages"},
                          stages=[])  # fmt: skip
    message = fails(recipe)
    assert message == (
        f"error: {recipe}:{line_of(recipe, 'inputs:')}: inputs: data/c.parquet: chat records "
        "are read from JSONL (.jsonl, .jsonl.gz, .jsonl.zst) or a .json array"
    )
    assert not (tmp_path / "out").exists()


def test_a_kept_field_named_like_a_core_column_is_refused_before_writing(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3))
    recipe = write_recipe(tmp_path, fields={"text": "string"})
    message = fails(recipe)
    assert message.startswith(f"error: {recipe}:{line_of(recipe, 'text: string')}: fields.text: ")
    assert "would replace the document's own column" in message
    assert not (tmp_path / "out").exists()


def test_paths_in_messages_are_shown_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recipe's paths start at the recipe's folder; a message shows them from where the
    user is (`curate run recipes/r.yaml` at the project's root), so they can be copied, and
    absolute when the file is outside the current folder."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl.gz").write_text("not gzip\n")
    monkeypatch.chdir(tmp_path)
    recipe = write_recipe(tmp_path / "recipes", inputs=["../data/*.jsonl.gz"])
    message = fails(Path("recipes/recipe.yaml"))
    assert "inputs[0]: input 'data/a.jsonl.gz' (from '../data/*.jsonl.gz') is not gzip" in message
    write_recipe(tmp_path / "recipes", inputs=["../data/missing.jsonl"])
    assert fails(Path("recipes/recipe.yaml")).endswith(
        "input '../data/missing.jsonl' does not exist (resolved to data/missing.jsonl)"
    )
    write_jsonl(tmp_path / "data" / "b.jsonl", corpus(3))
    write_recipe(tmp_path / "recipes", inputs=["../data/b.jsonl"],
                 stages=[{"tokenize": {"source": "../models/none"}}])  # fmt: skip
    assert (
        "tokenizer '../models/none' not found: no such file or folder (models/none, resolved "
        f"against {tmp_path / 'recipes'})"
    ) in fails(Path("recipes/recipe.yaml"))
    (tmp_path / "blocker").write_text("in the way\n")
    write_recipe(tmp_path / "recipes", inputs=["../data/b.jsonl"],
                 output={"root": "../blocker/out", "fsync": False})  # fmt: skip
    assert "cannot create output folder blocker/out/t: " in fails(Path("recipes/recipe.yaml"))
    (tmp_path / "data" / "x.parquet").write_bytes(b"PAR1" + b"not a footer" * 3 + b"PAR1")
    write_recipe(tmp_path / "recipes", inputs=["../data/x.parquet"])  # found when planning
    assert "input 'data/x.parquet' cannot be read as parquet: " in fails(
        Path("recipes/recipe.yaml")
    )
    write_recipe(tmp_path / "recipes", inputs=["../data/b.jsonl"], text_field="body")
    assert "input 'data/b.jsonl': all 3 records of partition 0 were quarantined for missing " in (
        fails(Path("recipes/recipe.yaml"))
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the files are outside it: absolute paths
    write_recipe(tmp_path / "recipes", inputs=["../data/*.jsonl.gz"])
    message = fails(recipe)
    assert f"input '{tmp_path / 'data' / 'a.jsonl.gz'}' (from '../data/*.jsonl.gz')" in message
