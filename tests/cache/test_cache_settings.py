"""`output.cache` in a recipe: its forms, its place outside the fingerprint, and the run's
decision to cache, or to skip caching with one notice when it cannot fit (never to fail)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import REPO, corpus, write_jsonl, write_recipe

from curate.build import cache_for_run, cache_needed, space_needed, space_note
from curate.cache.options import DEFAULT_BUDGET
from curate.cache.settings import cache_root, cache_spec, decide_cache
from curate.errors import CurateError
from curate.fingerprint import content_recipe
from curate.io.inputs import discover_inputs
from curate.recipe import Recipe
from curate.store import Store


def recipe_with(tmp_path: Path, cache: object = None, **output: object) -> Recipe:
    out: dict[str, object] = {"root": "out", "fsync": False, **output}
    if cache is not None:
        out["cache"] = cache
    return Recipe.load(write_recipe(tmp_path, output=out))


def store_of(tmp_path: Path, recipe: Recipe) -> Store:
    out = recipe.output
    return Store(tmp_path / "out", recipe.name, dir_mode=int(out.dir_mode, 8),
                 file_mode=int(out.file_mode, 8))  # fmt: skip


@pytest.mark.parametrize(
    ("given", "enabled", "max_size"),
    [(None, True, None), (True, True, None), (False, False, None),
     ({"max_size": "2GB"}, True, 2 * 10**9), ({"enabled": False, "max_size": 10}, False, 10)],
)  # fmt: skip
def test_cache_forms(tmp_path: Path, given: object, enabled: bool, max_size: int | None) -> None:
    cache = recipe_with(tmp_path, given).output.cache
    assert (cache.enabled, cache.max_size) == (enabled, max_size)


@pytest.mark.parametrize(
    ("given", "message"),
    [({"max_size": "lots"}, "output.cache.max_size: must be a size"),
     ({"enable": False}, "did you mean 'enabled'"), ("yes please", "output.cache")],
)  # fmt: skip
def test_bad_cache_settings_name_their_line(tmp_path: Path, given: object, message: str) -> None:
    with pytest.raises(CurateError, match=message) as info:
        recipe_with(tmp_path, given)
    assert "recipe.yaml:" in str(info.value)


def test_cache_settings_are_not_in_the_fingerprint(tmp_path: Path) -> None:
    plain = content_recipe(recipe_with(tmp_path))
    for other in (False, {"max_size": "1GB"}):
        assert content_recipe(recipe_with(tmp_path, other)) == plain
    assert "cache" not in plain["output"]


def test_schema_accepts_both_forms() -> None:
    schema = json.loads((REPO / "schemas" / "recipe.schema.json").read_text())
    base = {"name": "t", "inputs": ["a.jsonl"], "stages": [{"normalize": {}}]}
    for cache in (True, False, {"enabled": True, "max_size": "50GB"}, {"max_size": 10}):
        jsonschema.validate({**base, "output": {"cache": cache}}, schema)
    for cache in ("on", {"size": 1}, {"max_size": "big"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**base, "output": {"cache": cache}}, schema)


def test_spec_from_recipe(tmp_path: Path) -> None:
    recipe = recipe_with(tmp_path, {"max_size": "3GB"}, file_mode="0600", dir_mode="0700")
    spec = cache_spec(recipe, store_of(tmp_path, recipe))
    assert spec is not None
    assert (
        spec.root
        == tmp_path / "out" / "t" / ".cache" / "stages"
        == cache_root(tmp_path / "out" / "t")
    )
    assert (spec.budget, spec.file_mode, spec.dir_mode, spec.fsync) == (
        3 * 10**9,
        0o600,
        0o700,
        False,
    )
    off = recipe_with(tmp_path, False)
    assert cache_spec(off, store_of(tmp_path, off)) is None
    default = recipe_with(tmp_path)
    total = shutil.disk_usage(tmp_path).total
    assert cache_spec(default, store_of(tmp_path, default)).budget == min(
        DEFAULT_BUDGET, total // 4
    )  # type: ignore[union-attr]


def test_decide_cache_caches_when_it_fits(tmp_path: Path) -> None:
    recipe = recipe_with(tmp_path, file_mode="0600", dir_mode="0700")
    spec = decide_cache(recipe, store_of(tmp_path, recipe), 10**6)
    assert spec is not None and spec.root.is_dir()
    assert spec.root.stat().st_mode & 0o777 == 0o700 == spec.root.parent.stat().st_mode & 0o777


def test_over_budget_skips_caching_with_one_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recipe = recipe_with(tmp_path, {"max_size": "1MB"})
    with caplog.at_level(logging.WARNING):
        assert decide_cache(recipe, store_of(tmp_path, recipe), 2 * 10**6) is None
    [record] = caplog.records
    assert "stage cache skipped" in record.message and "budget of 1.0 MB" in record.message
    assert "\n" not in record.message and "curate gc" in record.message


def test_a_disk_too_small_for_the_cache_skips_caching(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = recipe_with(tmp_path)
    store = store_of(tmp_path, recipe)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage._replace(free=5 * 10**6))
    assert decide_cache(recipe, store, 4 * 10**6) is not None
    with caplog.at_level(logging.WARNING):
        assert decide_cache(recipe, store, 4 * 10**6, reserved=2 * 10**6) is None
    assert "is free" in caplog.records[-1].message


def test_a_link_at_the_cache_folder_skips_caching(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recipe = recipe_with(tmp_path)
    store = store_of(tmp_path, recipe)
    (tmp_path / "elsewhere").mkdir()
    store.path.mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere", store.path / ".cache")
    with caplog.at_level(logging.WARNING):
        assert decide_cache(recipe, store, 10) is None
    assert "stage cache skipped" in caplog.records[-1].message
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_space_estimate_counts_the_cache_when_it_is_on(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(500))
    recipe = recipe_with(tmp_path)
    files = discover_inputs(recipe.inputs, tmp_path)
    store = store_of(tmp_path, recipe)
    store.ensure()
    size = files[0].size
    assert cache_needed(recipe, files) >= size * len(recipe.stages)
    build = space_needed(recipe, files, store, "f" * 64)
    assert space_needed(recipe, files, store, "f" * 64, cache=True) == build + cache_needed(
        recipe, files
    )
    assert "stage cache" in space_note(recipe, files, store, "f" * 64)
    off = recipe_with(tmp_path, False)
    assert "stage cache" not in space_note(off, files, store, "f" * 64)
    assert cache_for_run(off, files, store, "f" * 64) is None
    assert cache_for_run(recipe, files, store, "f" * 64) is not None
    small = recipe_with(tmp_path, {"max_size": size})
    assert cache_for_run(small, files, store, "f" * 64) is None  # the cache would not fit


def test_recipe_yaml_round_trip(tmp_path: Path) -> None:
    path = write_recipe(tmp_path, output={"root": "out", "cache": {"max_size": "5GB"}})
    assert yaml.safe_load(path.read_text())["output"]["cache"] == {"max_size": "5GB"}
    assert Recipe.load(path).resolved()["output"]["cache"] == {
        "enabled": True,
        "max_size": 5 * 10**9,
    }
