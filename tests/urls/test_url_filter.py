"""url_filter: UT1 folders and plain lists, subdomains through the offline suffix list,
allow lists, FineWeb's URL words, documents without a URL, reasons, fingerprint, manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import write_jsonl, write_recipe

from curate import reasons
from curate.errors import CurateError
from curate.runner import run as run_recipe
from curate.urls.hosts import host_candidates, offline_extractor

TEXT = "The council met on Tuesday and approved the budget for the new library building."

DOCS: list[dict[str, Any]] = [
    {"id": "plain", "url": "https://news.example.org/story/1"},
    {"id": "adult_sub", "url": "http://www.videos.badsite.co.uk/watch?v=1"},  # ut1/adult
    {"id": "adult_reg", "url": "https://BADSITE.co.uk/"},
    {"id": "lookalike", "url": "https://notbadsite.co.uk/"},  # not a subdomain
    {"id": "casino", "url": "https://spin.casino-royal.net/play"},  # ut1/gambling
    {"id": "alias", "url": "https://alias-only.com/"},  # in porn -> adult, read once
    {"id": "ut1_url", "url": "https://hosting.com/~someone/pics/1.html"},  # ut1/adult urls
    {"id": "spam", "url": "https://a.b.spammy.io/x"},  # plain domains list
    {"id": "ads", "url": "https://cdn.net/static/adserver/banner.js"},  # plain urls list
    {"id": "trusted", "url": "https://docs.badsite.co.uk/manual"},  # allowed
    {"id": "banned", "url": "https://blog.net/some-xxx-page"},
    {"id": "soft2", "url": "https://shop.net/hot-girls"},
    {"id": "soft1", "url": "https://shop.net/hot-dogs"},
    {"id": "subword", "url": "https://shop.net/mega-naughtystuff"},
    {"id": "capitals", "url": "https://blog.net/XXX"},  # lowercased first (unlike datatrove)
    {"id": "null_url", "url": None},
    {"id": "empty_url", "url": ""},
    {"id": "ip", "url": "http://10.0.0.7/admin"},
]


def lists(root: Path) -> Path:
    ut1 = root / "lists" / "blacklists"
    (ut1 / "adult").mkdir(parents=True)
    (ut1 / "adult" / "domains").write_text("# adult\nbadsite.co.uk\nalias-only.com\n\n")
    (ut1 / "adult" / "urls").write_text("hosting.com/~someone/pics\n")
    (ut1 / "gambling").mkdir()
    (ut1 / "gambling" / "domains").write_text("casino-royal.net\nbadsite.co.uk\n")
    (ut1 / "porn").symlink_to("adult")
    (ut1 / "global_usage").write_text("not a category\n")
    (root / "lists" / "spam.txt").write_text("*.spammy.io\n10.0.0.8\n")
    (root / "lists" / "ads.txt").write_text("http://cdn.net/static/adserver/\n")
    (root / "lists" / "trusted.txt").write_text("docs.badsite.co.uk\n")
    (root / "lists" / "banned.txt").write_text("xxx\n# comment\n")
    (root / "lists" / "soft.txt").write_text("hot\ngirls\nbabes\n")
    (root / "lists" / "subwords.txt").write_text("naughty\n")
    return root


def params(**extra: Any) -> dict[str, Any]:
    return {
        "block": [
            {"name": "ut1", "path": "lists/blacklists"},
            {"name": "spam", "path": "lists/spam.txt"},
            {"name": "ads", "path": "lists/ads.txt", "kind": "urls"},
        ],
        "allow": [{"name": "trusted", "path": "lists/trusted.txt"}],
        "banned_words": "lists/banned.txt",
        "soft_banned_words": "lists/soft.txt",
        "banned_subwords": "lists/subwords.txt",
        **extra,
    }


def project(tmp_path: Path, **extra: Any) -> Path:
    lists(tmp_path)
    write_jsonl(tmp_path / "data" / "a.jsonl", [{**d, "text": f"{TEXT} {d['id']}"} for d in DOCS])
    return write_recipe(
        tmp_path, fields={"url": "string"}, stages=[{"url_filter": params(**extra)}]
    )


def removed_reasons(version_path: Path) -> dict[str, str]:
    manifest = json.loads((version_path / "manifest.json").read_text())
    tables = [pa.ipc.open_stream(version_path / f["path"]).read_all() for f in manifest["rejected"]]
    rows = pa.concat_tables(tables).to_pylist()
    return {r["id"]: r["reason"] for r in rows}


EXPECTED = {
    "adult_sub": "url_domain:ut1/adult",
    "adult_reg": "url_domain:ut1/adult",  # in gambling too: the first category read wins
    "casino": "url_domain:ut1/gambling",
    "alias": "url_domain:ut1/adult",
    "ut1_url": "url_substring:ut1/adult",
    "spam": "url_domain:spam",
    "ads": "url_substring:ads",
    "banned": "url_banned_word",
    "soft2": "url_soft_banned_words",
    "subword": "url_banned_subword",
    "capitals": "url_banned_word",
}


def test_lists_words_and_reasons(tmp_path: Path) -> None:
    version = run_recipe(project(tmp_path))
    kept = sorted(version.to_arrow().column("id").to_pylist())
    assert kept == sorted(["plain", "lookalike", "trusted", "soft1", "null_url", "empty_url", "ip"])
    got = removed_reasons(Path(version.path))
    assert got == EXPECTED
    assert all(reasons.known(r) for r in got.values())
    manifest = json.loads((Path(version.path) / "manifest.json").read_text())
    record = manifest["stages"][0]
    assert record["removed"]["url_domain:ut1/adult"] == 3
    details = record["details"]
    files = details["block"][0]["files"]
    assert [(f["list"], f["kind"]) for f in files] == [
        ("ut1/adult", "domains"), ("ut1/adult", "urls"), ("ut1/gambling", "domains")
    ]  # fmt: skip
    assert all(len(f["sha256"]) == 64 for f in files)
    assert len(details["words"]["banned_words"]["sha256"]) == 64
    stats = json.loads((Path(version.path) / "statistics.json").read_text())
    assert "url/allowed" in json.dumps(stats)


def test_missing_url_dropped_when_asked(tmp_path: Path) -> None:
    version = run_recipe(project(tmp_path, missing_url="drop"))
    got = removed_reasons(Path(version.path))
    assert got["null_url"] == got["empty_url"] == "url_missing"
    assert "ip" not in got  # 10.0.0.8 is listed, not 10.0.0.7


def test_categories_chosen_in_order(tmp_path: Path) -> None:
    block = [{"name": "ut1", "path": "lists/blacklists", "categories": ["gambling"]}]
    version = run_recipe(project(tmp_path, block=block, allow=[]))
    got = removed_reasons(Path(version.path))
    assert got["adult_reg"] == got["adult_sub"] == got["trusted"] == "url_domain:ut1/gambling"
    assert "alias" not in got and "ut1_url" not in got


def test_editing_a_list_makes_a_new_version(tmp_path: Path) -> None:
    recipe = project(tmp_path)
    first = run_recipe(recipe)
    assert run_recipe(recipe).name == first.name  # unchanged: the same version
    with open(tmp_path / "lists" / "blacklists" / "gambling" / "domains", "a") as f:
        f.write("example.org\n")
    second = run_recipe(recipe)
    assert second.name != first.name
    assert removed_reasons(Path(second.path))["plain"] == "url_domain:ut1/gambling"


def test_host_candidates_stop_at_the_registered_domain() -> None:
    extract = offline_extractor()
    assert host_candidates(extract, "http://a.b.example.co.uk:8080/x") == [
        "a.b.example.co.uk", "b.example.co.uk", "example.co.uk"
    ]  # fmt: skip
    assert host_candidates(extract, "https://1.2.3.4/x") == ["1.2.3.4"]
    assert host_candidates(extract, "localhost") == ["localhost"]
    private = offline_extractor(private_suffixes=True)
    assert host_candidates(private, "https://me.blogspot.com/")[-1] == "me.blogspot.com"
    assert host_candidates(extract, "https://me.blogspot.com/")[-1] == "blogspot.com"


def test_a_link_out_of_the_list_folder_is_refused(tmp_path: Path) -> None:
    recipe = project(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "domains").write_text("example.org\n")
    (tmp_path / "lists" / "blacklists" / "escape").symlink_to(outside)
    with pytest.raises(CurateError, match="leads outside the list's folder"):
        run_recipe(recipe)


def test_recipe_errors(tmp_path: Path) -> None:
    lists(tmp_path)
    write_jsonl(tmp_path / "data" / "a.jsonl", [{"id": "x", "text": TEXT, "url": "https://a.io"}])
    write_recipe(tmp_path, fields={"url": "string"}, stages=[{"url_filter": {}}])
    with pytest.raises(CurateError, match="nothing to drop"):
        run_recipe(tmp_path / "recipe.yaml")
    bad = params(block=[{"name": "ut1", "path": "lists/blacklists", "categories": ["nope"]}])
    write_recipe(tmp_path, fields={"url": "string"}, stages=[{"url_filter": bad}])
    with pytest.raises(CurateError, match=r"recipe.yaml:\d+: .*no category folder"):
        run_recipe(tmp_path / "recipe.yaml")
    write_recipe(tmp_path, stages=[{"url_filter": params()}])  # url not kept from the inputs
    with pytest.raises(CurateError, match="reads column 'url'"):
        run_recipe(tmp_path / "recipe.yaml")


def test_chat_records(tmp_path: Path) -> None:
    lists(tmp_path)
    chats = [
        {"id": d["id"], "url": d["url"],
         "messages": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hi."}]}
        for d in DOCS
    ]  # fmt: skip
    write_jsonl(tmp_path / "data" / "a.jsonl", chats)
    recipe = write_recipe(
        tmp_path, chat={"shape": "auto"}, fields={"url": "string"},
        stages=[{"url_filter": params()}],
    )  # fmt: skip
    version = run_recipe(recipe)
    assert removed_reasons(Path(version.path)) == EXPECTED
