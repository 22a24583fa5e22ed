"""The dataset card: a `README.md` in each version, in the Hugging Face dataset-card layout.

It is the document a team hands to whoever audits a model: what went in, what each stage
removed and why, the tokenizer, how to load it. Its YAML header is what the Hub and
`datasets` read: `size_categories`, `language` (when a language stage recorded them),
`license` (left for the team: curate cannot know it) and `configs`, whose `data_files`
list each split's shards by path in the manifest's order, so `datasets.load_dataset` reads
the shards, in the order `load_from_disk` does, and never takes a rejected, quarantine,
statistics or examples file for data.

Written from the manifest (and the statistics file, `curate.stats.document`, when the
version has one: its sums per stage and per input), before the version is sealed, and
listed in the manifest with its sha256 so `curate verify` covers it. Neither holds
document text (counts, bins, reasons, codes), so neither does the card. It is
deterministic: no clock, host, engine, timing, cache figure or fingerprint (which covers
the engine settings) goes in, so the same recipe on the same inputs writes the same card
whatever the workers or engine.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from curate.dirfd import write_atomic
from curate.hf_layout import DICT
from curate.manifest import CardFile, Manifest, StageRecord

NAME = "README.md"
LICENSE = "license: unknown  # left for the team: an SPDX id from the Hub's list, or other\n"
_SIZES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
          (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"),
          (1_000_000_000, "100M<n<1B"), (10_000_000_000, "1B<n<10B"),
          (100_000_000_000, "10B<n<100B"), (1_000_000_000_000, "100B<n<1T")]  # fmt: skip
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}$")


def write_card(out: Path, manifest: Manifest, *, mode: int, fsync: bool) -> CardFile:
    """Write `README.md` into the staging folder's `out`; the record the manifest lists."""
    text = card_text(manifest, statistics_of(out, manifest))
    write_atomic(out / NAME, text, mode=mode, fsync=fsync)
    data = text.encode()
    return CardFile(path=NAME, bytes=len(data), sha256=hashlib.sha256(data).hexdigest())


def card_text(manifest: Manifest, statistics: dict[str, Any] | None = None) -> str:
    m = manifest
    sections = [
        _header(m),
        f"# {m.dataset} {m.version}\n\n"
        f"A curate dataset version, made by curate {m.software.get('curate', '?')}. "
        "`manifest.json` beside this card is the full record (fingerprint, parameters, "
        "software, every file's sha256; `curate verify` checks them, this card's too). "
        "This card is generated from it and holds counts and reasons, never document text.",
        _inputs(m),
        _stages(m),
        _output(m),
        _tokenizer(m),
        _statistics(m, statistics),
        _loading(m),
        "## Licence\n\nLeft for the team: set `license:` in the header above (the inputs' "
        "licences decide it; curate does not know them).",
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def size_category(n: int) -> str:
    for limit, name in _SIZES:
        if n < limit:
            return name
    return "n>1T"


def languages(manifest: Manifest) -> list[str]:
    """The language codes a language stage counted, most documents first; a stage that keeps
    only some languages contributes those of them it saw."""
    counts: dict[str, int] = {}
    for stage in manifest.stages:
        seen = {k.removeprefix("language:"): v for k, v in stage.counters.items()
                if k.startswith("language:")}  # fmt: skip
        wanted = stage.params.get("languages")
        if isinstance(wanted, list):
            seen = {k: v for k, v in seen.items() if k in wanted}
        for code, n in seen.items():
            if _LANGUAGE_CODE.match(code) and n > 0:
                counts[code] = max(counts.get(code, 0), n)
    return sorted(counts, key=lambda c: (-counts[c], c))


def data_files(manifest: Manifest) -> dict[str, list[str]]:
    """Split name -> its shards' paths, in the manifest's (and state.json's) order."""
    names = list(manifest.splits.splits) if manifest.splits is not None else ["train"]
    found: dict[str, list[str]] = {n: [] for n in names}
    for shard in manifest.shards:
        found[shard.split or "train"].append(shard.path)
    return found


def _header(m: Manifest) -> str:
    head: dict[str, Any] = {
        "pretty_name": f"{m.dataset} {m.version}",
        "size_categories": [size_category(m.counts.written)],
    }
    codes = languages(m)
    if codes:
        head["language"] = codes
    configs = {
        "configs": [{
            "config_name": "default",
            "data_files": [{"split": s, "path": p} for s, p in data_files(m).items()],
        }],
        "tags": ["curate"],
    }  # fmt: skip
    return "---\n" + _yaml(head) + LICENSE + _yaml(configs) + "---"


def _yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def _cell(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _inputs(m: Manifest) -> str:
    c = m.counts
    rows: list[list[object]] = [
        [i.name, i.format, i.size, i.documents, i.quarantined, i.content_hash] for i in m.inputs
    ]
    header = ["input", "format", "bytes", "documents", "quarantined", "content hash"]
    parents = f"\n\nRead from the curate versions: {', '.join(m.parents)}." if m.parents else ""
    return (
        f"## What went in\n\n{c.read} records from {len(m.inputs)} inputs: {c.documents} "
        f"documents, {c.quarantined} records quarantined as unreadable "
        f"({c.quarantined_bytes} bytes).{parents}\n\n" + _table(header, rows)
    )


def _stages(m: Manifest) -> str:
    rows: list[list[object]] = [
        [s.position, s.name, s.kind, s.docs_in, s.docs_out, s.changed,
         sum(s.removed.values())] for s in m.stages
    ]  # fmt: skip
    header = ["#", "stage", "kind", "documents in", "out", "changed", "removed"]
    parts = ["## What each stage did", _table(header, rows)]
    for s in m.stages:
        parts.append(_stage_detail(s))
    return "\n\n".join(parts)


def _stage_detail(s: StageRecord) -> str:
    lines = [
        f"### {s.position}. {s.name}",
        "",
        "Parameters: `" + json.dumps(s.params, sort_keys=True) + "`",
    ]
    if s.removed:
        lines += ["", "Removed, by reason:", ""]
        lines += [f"- `{_cell(r)}`: {n}" for r, n in sorted(s.removed.items(), key=_most)]
    else:
        lines += ["", "Removed nothing."]
    if s.counters:
        lines += ["", "Counted:", ""]
        lines += [f"- `{_cell(k)}`: {n}" for k, n in sorted(s.counters.items())]
    return "\n".join(lines)


def _most(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _output(m: Manifest) -> str:
    shards = m.shards
    rows = sum(s.rows for s in shards)
    size = sum(s.bytes for s in shards)
    tokens = f", {m.tokens} tokens" if m.tokens is not None else ""
    text = (
        f"## What came out\n\n{m.counts.written} documents in {rows} rows{tokens}: "
        f"{len(shards)} Arrow shards ({size} bytes). Removed: {m.counts.removed_total} "
        f"documents (their ids and reasons are in `rejected/`, the version's own files)."
    )
    if m.splits is not None:
        split_rows: list[list[object]] = [
            [n, r.fraction, r.documents, r.rows, r.tokens if r.tokens is not None else "",
             r.shards] for n, r in m.splits.splits.items()
        ]  # fmt: skip
        text += (
            f"\n\nSplits by a seeded hash of each document's id ({m.splits.method}, seed "
            f"{m.splits.seed}):\n\n"
            + _table(["split", "fraction", "documents", "rows", "tokens", "shards"], split_rows)
        )
    if m.packing is not None:
        p = m.packing
        text += (
            f"\n\nPacked ({p.kind}) into rows of {p.seq_len} tokens; {p.tokens_lost} tokens "
            f"({p.lost_fraction:.6f}) are in short rows that fixed-length reading skips."
        )
    columns = ", ".join(f"`{c['name']}` ({c['type']})" for c in m.schema_)
    return text + f"\n\nColumns: {columns}."


def _tokenizer(m: Manifest) -> str:
    stages = [s for s in m.stages if s.name == "tokenize" or "tokenize" in s.params]
    if not stages:
        return "## Tokenizer\n\nNone: the version holds text."
    s = stages[-1]
    files = {k.removeprefix("tokenizer_sha256:"): v for k, v in s.software.items()
             if k.startswith("tokenizer_sha256:")}  # fmt: skip
    lines = ["## Tokenizer", "", f"Stage {s.position} ({s.name}), parameters: `"
             + json.dumps(s.params, sort_keys=True) + "`."]  # fmt: skip
    if files:
        lines += ["", "Its files, by sha256:", ""]
        lines += [f"- `{_cell(name)}`: `{digest}`" for name, digest in sorted(files.items())]
    libraries = {k: v for k, v in s.software.items()
                 if not k.startswith("tokenizer_sha256:") and k != "code_sha256"}  # fmt: skip
    if libraries:
        lines += ["", "Libraries: " + ", ".join(f"{k} {v}" for k, v in sorted(libraries.items()))]
    return "\n".join(lines)


def statistics_of(out: Path, manifest: Manifest) -> dict[str, Any] | None:
    """The statistics file the manifest lists (`curate.stats.document`), read back from the
    version's own folder; None when the version has none."""
    record = manifest.statistics
    if record is None or "/" in record.path or record.path in ("", ".", ".."):
        return None
    data = json.loads((out / record.path).read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def _statistics(m: Manifest, stats: dict[str, Any] | None) -> str:
    """Characters and tokens through the stages, and per input, from the statistics file."""
    if m.statistics is None or stats is None:
        return ""
    parts = [
        f"## Statistics\n\nFrom `{m.statistics.path}` (sha256 `{m.statistics.sha256}`), "
        "which holds the distributions too (lengths, filter measures with their thresholds, "
        "languages); `curate report` draws them."
    ]
    rows: list[list[object]] = []
    for stage in _dicts(stats.get("stages")):
        sums = stage.get("sums")
        sums = sums if isinstance(sums, dict) else {}
        rows.append([stage.get("position"), stage.get("name"),
                     *(sums.get(k, "") for k in _SUMS)])  # fmt: skip
    if rows:
        header = ["#", "stage", "characters in", "characters out", "tokens in", "tokens out"]
        parts.append(_table(header, rows))
    sources: list[list[object]] = [
        [src.get("input"), src.get("documents"), src.get("quarantined"), src.get("written"),
         src.get("characters"), "" if src.get("tokens") is None else src.get("tokens")]
        for src in _dicts(stats.get("sources"))
    ]  # fmt: skip
    if sources:
        header = ["input", "documents", "quarantined", "written", "characters", "tokens"]
        parts.append("Per input:\n\n" + _table(header, sources))
    return "\n\n".join(parts)


_SUMS = ("characters_in", "characters_out", "tokens_in", "tokens_out")


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _loading(m: Manifest) -> str:
    """Both of `datasets`' loaders read the folder (`curate.hf_layout`), except a
    version made before its layout without splits (a card written again by a purge)."""
    where = f"path/to/{m.dataset}/{m.version}"
    if m.splits is not None:
        disk, api = "a `DatasetDict` of its splits", 'a `DatasetDict`, or to_dataset("train")'
    elif m.layout == DICT:
        disk, api = "a `DatasetDict` of one split, `train`", "one `Dataset`"
    else:
        disk, api = "one `Dataset`", "one `Dataset`"
    hub = (
        f'ds = datasets.load_dataset("{where}")  # reads the configs above: the same rows'
        if m.splits is not None or m.layout == DICT
        else "# datasets.load_dataset refuses a folder holding state.json (load_from_disk's "
        'layout);\n# uploaded to the Hub, datasets.load_dataset("<org>/<name>") reads the '
        "configs above"
    )
    return (
        "## How to load\n\n```python\nimport datasets\n\n"
        f'ds = datasets.load_from_disk("{where}")  # {disk}, memory-mapped\n'
        f"{hub}\n\nimport curate\n\n"
        f'version = curate.open("{where}")  # checks every file against the manifest\n'
        f"ds = version.to_dataset()  # {api}, through a view in curate's cache\n"
        "```\n\n`curate verify` hashes every file against `manifest.json` (this card included)."
    )
