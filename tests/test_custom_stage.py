"""A user's stage named by dotted path runs like a built-in, and its code is in the fingerprint."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import write_jsonl, write_recipe

import curate


def test_dotted_path_stages(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    write_jsonl(
        tmp_path / "data" / "a.jsonl",
        [{"id": "1", "text": "keep me"}, {"id": "2", "text": "spam here"}],
    )
    recipe = write_recipe(
        tmp_path,
        stages=[{"custom_stages:DropKeyword": {"keyword": "spam"}}, {"custom_stages.Upper": {}}],
    )
    version = curate.run(recipe)
    assert version.to_arrow().column("text").to_pylist() == ["KEEP ME"]
    assert version.counts["removed"] == {"0:drop_keyword": {"mentions_keyword": 1}}
    from custom_stages import DropKeyword

    from curate.cache.code import code_hash

    software = version.manifest["stages"][0]["software"]
    assert software["code_sha256"] == code_hash(DropKeyword)


def test_a_stage_module_not_on_the_path_says_how_to_make_it_importable(tmp_path: Path) -> None:
    import pytest

    (tmp_path / "mylab_qa").mkdir()
    (tmp_path / "mylab_qa" / "__init__.py").write_text("")
    recipe = write_recipe(tmp_path, stages=[{"mylab_qa.stages:DropKeyword": {}}])
    with pytest.raises(curate.CurateError) as exc:
        curate.Recipe.load(recipe)  # tmp_path is not on sys.path, as with the curate command
    assert str(exc.value).endswith(
        "No module named 'mylab_qa'; install it, or put the folder holding 'mylab_qa' on PYTHONPATH"
    )
    sys.path.insert(0, str(tmp_path))
    try:  # found, but the module inside is missing: no PYTHONPATH advice
        with pytest.raises(curate.CurateError) as exc:
            curate.Recipe.load(recipe)
        assert str(exc.value).endswith("No module named 'mylab_qa.stages'")
    finally:
        sys.path.remove(str(tmp_path))
