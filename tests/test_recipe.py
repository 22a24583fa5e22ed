"""Recipes: safe YAML, defaults filled in, and errors that name file, YAML path and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from curate.errors import CurateError
from curate.recipe import Recipe


def load(tmp_path: Path, text: str) -> Recipe:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return Recipe.load(path)


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(CurateError) as exc:
        load(tmp_path, text)
    return str(exc.value)


def test_minimal_recipe_gets_defaults(tmp_path: Path) -> None:
    r = load(tmp_path, "name: x\ninputs: [a.jsonl]\nstages:\n  - normalize:\n  - exact_dedup: {}\n")
    resolved = r.resolved()
    assert resolved["stages"][0]["normalize"]["form"] == "NFC"
    assert resolved["output"]["shard_size"] == 256_000_000
    assert resolved["engine"]["kind"] == "local"
    assert r.base_dir == tmp_path.resolve()


def test_sizes_accept_units(tmp_path: Path) -> None:
    r = load(tmp_path, "name: x\ninputs: [a]\noutput: {shard_size: 1.5GiB}\npartition_size: 64MB\n")
    assert r.output.shard_size == int(1.5 * 2**30)
    assert r.partition_size == 64_000_000


def test_bad_enum_names_file_line_and_path(tmp_path: Path) -> None:
    msg = error(
        tmp_path,
        "name: x\ninputs: [a]\nstages:\n  - normalize: {}\n  - normalize:\n      form: NFX\n",
    )
    assert (
        f"{tmp_path / 'recipe.yaml'}:6: stages[1].normalize.form: must be one of NFC, NFKC" in msg
    )


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    msg = error(
        tmp_path,
        "name: x\ninputs: [a]\nstages:\n  - normalise: {}\n  - filter_length: {min_char: 3}\n"
        "engine: {workers: 0}\n",
    )
    lines = msg.splitlines()
    assert len(lines) == 3
    assert ":4: stages[0]: unknown stage 'normalise' (did you mean 'normalize'?)" in lines[0]
    assert (
        ":5: stages[1].filter_length.min_char: unknown key 'min_char' (did you mean 'min_chars'?)"
        in lines[1]
    )
    assert ":6: engine.workers:" in lines[2]


def test_cross_field_check_in_stage_params(tmp_path: Path) -> None:
    msg = error(
        tmp_path, "name: x\ninputs: [a]\nstages:\n  - filter_length: {min_chars: 9, max_chars: 2}\n"
    )
    assert "stages[0].filter_length: min_chars (9) is greater than max_chars (2)" in msg


def test_missing_required_and_unknown_top_level(tmp_path: Path) -> None:
    msg = error(tmp_path, "inputs: [a]\noutpt: {}\n")
    assert "name: is required" in msg
    assert ":2: outpt: unknown key 'outpt' (did you mean 'output'?)" in msg


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    msg = error(tmp_path, "name: x\ninputs: [a\nstages: []\n")
    assert "invalid YAML" in msg and str(tmp_path / "recipe.yaml") in msg


def test_yaml_is_loaded_safely(tmp_path: Path) -> None:
    msg = error(tmp_path, "name: !!python/object/apply:os.system ['echo pwned']\ninputs: [a]\n")
    assert "invalid YAML" in msg


def test_recipe_in_python(tmp_path: Path) -> None:
    r = Recipe(name="x", inputs=["a.jsonl"], stages=[{"normalize": {"form": "NFKC"}}])
    assert r.stages[0].params.form == "NFKC"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"stages\[0\].normalize.form: must be one of NFC, NFKC"):
        Recipe(name="x", inputs=["a"], stages=[{"normalize": {"form": "bad"}}])


def test_sample_recipe_is_valid() -> None:
    from conftest import REPO

    r = Recipe.load(REPO / "recipes" / "sample.yaml")
    assert [s.name for s in r.stages][:1] == ["normalize"] and "exact_dedup" in [
        s.name for s in r.stages
    ]


def test_duplicate_keys_are_errors(tmp_path: Path) -> None:
    msg = error(
        tmp_path,
        "name: x\ninputs: [a]\nstages:\n  - filter_length:\n      min_chars: 1\n      min_chars: 2\n",
    )
    assert ":6: stages[0].filter_length.min_chars: duplicate key" in msg


def test_common_shape_mistakes_say_what_to_write(tmp_path: Path) -> None:
    msg = error(tmp_path, "name: x\ninputs: data/a.jsonl\nstages: {normalize: {}}\n")
    assert "recipe.yaml:2: inputs: must be a list, e.g. [data/a.jsonl]" in msg
    assert "recipe.yaml:3: stages: must be a list, e.g. one '- item' line per entry" in msg
    msg = error(tmp_path, "name: my data\ninputs: [a.jsonl]\n")
    assert "recipe.yaml:1: name: 'my data' is not a dataset name: use letters, digits" in msg


def test_a_folder_given_as_the_recipe(tmp_path: Path) -> None:
    with pytest.raises(CurateError, match=r"is a folder; name the recipe's \.yaml file"):
        Recipe.load(tmp_path)


BILLION_LAUGHS = """\
name: laughs
inputs: [a.jsonl]
stages: [{normalize: {}}]
lol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]
lol1: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0]
lol2: &l2 [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]
lol3: &l3 [*l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2]
lol4: &l4 [*l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3]
lol5: &l5 [*l4, *l4, *l4, *l4, *l4, *l4, *l4, *l4, *l4, *l4]
lol6: &l6 [*l5, *l5, *l5, *l5, *l5, *l5, *l5, *l5, *l5, *l5]
lol7: &l7 [*l6, *l6, *l6, *l6, *l6, *l6, *l6, *l6, *l6, *l6]
lol8: &l8 [*l7, *l7, *l7, *l7, *l7, *l7, *l7, *l7, *l7, *l7]
"""


@pytest.mark.timeout(30)
def test_an_alias_bomb_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    """10^9 strings through 90 aliases: loading used to hang (issue 14)."""
    msg = error(tmp_path, BILLION_LAUGHS)
    assert f"{tmp_path / 'recipe.yaml'}:11:" in msg and "aliases" in msg, msg


@pytest.mark.timeout(30)
def test_merge_keys_count_as_aliases(tmp_path: Path) -> None:
    levels = ["m0: &m0 {a: 1, b: 2}"] + [
        f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], k{i}: {i}}}" for i in range(1, 40)
    ]
    text = "name: m\ninputs: [a.jsonl]\nstages: [{normalize: {}}]\n" + "\n".join(levels) + "\n"
    assert "aliases" in error(tmp_path, text)


@pytest.mark.timeout(30)
def test_a_recursive_alias_or_deep_nesting_is_an_error_not_a_crash(tmp_path: Path) -> None:
    msg = error(tmp_path, "name: r\ninputs: [a.jsonl]\nstages: [{normalize: {}}]\nx: &x [*x]\n")
    assert ":4:" in msg and "itself" in msg, msg
    deep = "name: d\ninputs: [a.jsonl]\nstages: [{normalize: {}}]\nx: " + "[" * 5000 + "]" * 5000
    assert "nested" in error(tmp_path, deep + "\n")


def test_small_anchors_still_work(tmp_path: Path) -> None:
    r = load(
        tmp_path,
        "name: a\ninputs: [a.jsonl, b.jsonl]\n"
        "stages:\n  - normalize: &norm {form: NFKC}\n  - filter_length: {min_words: 2}\n"
        "  - normalize: *norm\n",
    )
    assert [(s.name, getattr(s.params, "form", None)) for s in r.stages] == [
        ("normalize", "NFKC"),
        ("filter_length", None),
        ("normalize", "NFKC"),
    ]


BROKEN = {
    "unclosed": "name: r\ninputs: [a.jsonl\nstages: [{normalize: {}}]\n",
    "tab": "name: r\ninputs:\n\t- a.jsonl\n",
    "two documents": "name: r\n---\nname: s\n",
    "duplicate key": "name: r\ninputs: [a.jsonl]\nname: s\nstages: [{normalize: {}}]\n",
    "recursive alias": "name: r\ninputs: [a.jsonl]\nx: &x [*x]\n",
    "deep": "name: d\ninputs: [a.jsonl]\nx: " + "[" * 5000 + "]" * 5000 + "\n",
    "unknown field": "name: r\ninputs: [a.jsonl]\nstages: [{normalize: {}}]\nstagez: 1\n",
    "control character": "name: r\ninputs: [a.jsonl]\nstages: [{normalize: {}}]\nx: a\x01b\n",
    "control character after UTF-8": "name: r\n# é ü ß 日本\ninputs: [a.jsonl]\nx: \x01\n",
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_libyaml_and_pure_python_yaml_report_the_same_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Recipes are read with libyaml's parser when PyYAML has it (`yaml_lines.LOADER`), else
    with PyYAML's own: a broken recipe is reported at the same line whichever did the
    reading (their problem texts may differ in wording), and deep nesting as nested too
    deeply (libyaml also names its line)."""
    import yaml

    from curate import yaml_lines

    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("this PyYAML has no libyaml")
    messages = {}
    for loader in (yaml.CSafeLoader, yaml.SafeLoader):
        monkeypatch.setattr(yaml_lines, "LOADER", loader)
        messages[loader.__name__] = error(tmp_path, BROKEN[case])
    fast, plain = messages["CSafeLoader"], messages["SafeLoader"]
    if case == "deep":  # Python's recursion limit has no line; libyaml's bound does
        assert fast.endswith(".yaml:3: invalid YAML: nested too deeply"), messages
        assert plain.endswith(".yaml: invalid YAML: nested too deeply"), messages
        return
    where = [m.split(": ", 1)[0] for m in (fast, plain)]
    assert where[0] == where[1], messages
    if case.startswith("control character"):  # a clear error at its line, not a traceback
        assert ".yaml:4: invalid YAML: character #x0001 is not allowed" in fast, messages
    if case in ("unclosed", "tab") or case.startswith("control"):
        return  # YAML's own wording differs between the parsers
    assert fast == plain, messages
