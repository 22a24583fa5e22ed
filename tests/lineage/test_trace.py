"""`curate trace` and `Version.trace`: a document's source, what each stage did, where it is
(curate.lineage.trace, curate.lineage.match); one real run with normalize, pii, both dedups
and packed tokenize, traced through the command line and the API."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

import curate
from curate.errors import CurateError
from curate.lineage.trace import Tracer

TOKENIZER = str(REPO / "sample_data" / "tokenizer")
EMAIL = "jane.roe@example.org"


def text_of(i: int) -> str:
    return f"Report {i} covers " + " ".join(f"t{(i * 11 + k) % 97}" for k in range(12 + i % 9))


@pytest.fixture(scope="module")
def version(tmp_path_factory: pytest.TempPathFactory) -> curate.Version:
    folder = tmp_path_factory.mktemp("trace")
    lines = []
    for i in range(80):
        text = text_of(i)
        if i == 3:
            text = f"Write to {EMAIL} about  report {i}."  # two spaces: normalize changes it
        if i in (20, 40, 60):
            text = text_of(10)  # exact copies of d10
        if i == 70:
            text = text_of(11) + " tail"  # a near copy of d11
        lines.append(json.dumps({"id": f"d{i}", "text": text}))
    (folder / "a.jsonl").write_text("\n".join(lines[:50]) + "\n")
    (folder / "b.jsonl").write_text("\n".join(lines[50:]) + "\n")
    recipe = {
        "name": "t",
        "inputs": ["a.jsonl", "b.jsonl"],
        "id_field": "id",
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
        "stages": [
            {"normalize": {"collapse_spaces": True}},
            {"pii": {}},
            {"exact_dedup": {}},
            {"minhash_dedup": {"threshold": 0.7}},
            {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 48}}},
        ],
    }
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    return curate.run(folder / "recipe.yaml")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "curate.cli", "trace", *args], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip


def printed(stdout: str) -> list[dict[str, str]]:
    """The traces a command printed, each as {row name: value}."""
    out = []
    for block in stdout.strip().split("\n\n"):
        pairs = [re.match(r"^(.*?)\s{2,}(.*)$", line) for line in block.splitlines()]
        out.append({m.group(1): m.group(2) for m in pairs if m})
    return out


def rows(trace: object) -> dict[str, str]:
    return dict(trace.rows())  # type: ignore[attr-defined]


def test_a_written_document_s_source_stages_and_place(version: curate.Version) -> None:
    t = rows(version.trace("d3"))
    assert t["fate"] == "written"
    assert t["source file"] == "a.jsonl" and t["source line"] == "4"
    data = Path(t["source path"]).read_bytes()
    assert data[int(t["source offset"]) :].startswith(b'{"id": "d3"')
    assert t["source hash"] == version.manifest["inputs"][0]["content_hash"]
    assert t["stage 0 normalize"] == "changed the text"
    start = f"Write to {EMAIL}".index(EMAIL)
    assert t["stage 1 pii"] == f"found EMAIL_ADDRESS {start}-{start + len(EMAIL)}"
    assert t["stage 3 minhash_dedup"] == "kept: no duplicate"
    import pyarrow as pa

    shard = pa.ipc.open_stream(version.path / t["output shard"]).read_all()
    row = shard.slice(int(t["output row"]), 1).to_pylist()[0]
    k = row["doc_ids"].index("d3")
    assert row["doc_starts"][k] == int(t["output token start"]) and row["doc_offsets"][k] == 0
    assert t["output tokens"].split()[0].isdigit()


def test_the_kept_one_counts_its_cluster_and_the_removed_name_it(version: curate.Version) -> None:
    kept = rows(version.trace("d10"))
    assert kept["stage 2 exact_dedup"] == "kept: representative of a cluster of 4"
    tracer = Tracer(version)
    (removed,) = tracer.by_id("d40")
    r = rows(removed)
    assert r["fate"] == "removed by exact_dedup"
    assert r["stage 2 exact_dedup"].endswith("duplicate of d10 (similarity 1.000)")
    assert r["stage 4 tokenize"] == "not reached"
    near = rows(tracer.by_id("d70")[0])
    assert "near_duplicate, duplicate of d11 (similarity" in near["stage 3 minhash_dedup"]
    assert rows(version.trace("d11"))["stage 3 minhash_dedup"] == (
        "kept: representative of a cluster of 2"
    )


def test_row_and_token_name_the_document_there(version: curate.Version) -> None:
    tracer = Tracer(version)
    (found,) = tracer.lineage.find("d3")
    shard, row, start = found["shard"], found["row"], found["start"]
    (t,) = tracer.by_row(str(shard), row, start)
    assert t.id == "d3"
    name = version.manifest["shards"][shard]["path"].rsplit("/", 1)[-1]
    assert [x.id for x in tracer.by_row(name, row, start)] == ["d3"]
    with pytest.raises(CurateError, match="tokens 0-47"):
        tracer.by_row(str(shard), row, 48)


def test_match_finds_redacted_and_removed_documents_without_printing_them(
    version: curate.Version,
) -> None:
    out = cli(str(version.path), "--match", r"jane\.roe@")
    assert out.returncode == 0, out.stderr
    (t,) = printed(out.stdout)
    assert t["id"] == "d3" and t["stage 1 pii"].startswith("found EMAIL_ADDRESS")
    assert EMAIL not in out.stdout and "jane" not in out.stdout
    copies = printed(cli(str(version.path), "--match", "^" + text_of(10) + "$").stdout)
    assert [c["id"] for c in copies] == ["d10", "d20", "d40", "d60"]
    d60 = copies[3]  # removed: its source is where the match was met in its input
    assert (d60["fate"], d60["source file"], d60["source line"]) == (
        "removed by exact_dedup",
        "b.jsonl",
        "11",
    )


def test_id_through_the_command_and_the_notebook_view(version: curate.Version) -> None:
    out = cli(str(version.path), "--id", "d5")
    assert out.returncode == 0 and printed(out.stdout)[0]["source line"] == "6"
    missing = cli(str(version.path), "--id", "nope")
    assert missing.returncode == 2 and "no document" in missing.stderr
    both = cli(str(version.path), "--id", "d5", "--match", "x")
    assert both.returncode == 2 and "one of --id" in both.stderr
    html = version.trace("d5")._repr_html_()
    assert html.startswith("<table>") and "source line" in html
