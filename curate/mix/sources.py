"""A mixture's sources as opened versions, and the refusal of sources that do not mix.

A pinned source is opened (and held: a shared read lock, so gc leaves it while the mixture
is made) and refused unless its fingerprint is the one the mixture names; a recipe source is
built, or found up to date, by `curate.run`. Sources mix only when their samples mean the
same thing to a trainer: the same tokenizer (by fingerprint) and BOS/EOS policy, the same
packing (row length), the same record shape (text or chat) and the same columns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import CurateError
from curate.mix.spec import MixSource, Mixture
from curate.output.shards import read_stream
from curate.version import Version


@dataclass
class Source:
    """A source version and what a trainer would see in it."""

    label: str
    spec: MixSource
    at: tuple[str | int, ...]  # where mixture.yaml names it
    version: Version
    tokenizer: dict[str, Any]
    stage: dict[str, Any]  # the manifest's stage record that tokenized it
    pack: dict[str, Any]
    chat: bool

    @property
    def shards(self) -> list[tuple[dict[str, Any], Path]]:
        """(manifest record, path) of the shards drawn from (of `split`, when it has splits)."""
        split = self.spec.split if self.version.splits else None
        if self.version.splits and split is None:
            split = "train"
        self.version.split_shard_paths(split)  # an unknown split is refused by name
        paths = self.version.shard_paths
        records = self.version.manifest["shards"]
        return [(r, p) for r, p in zip(records, paths, strict=True) if r.get("split") == split]

    def row_tokens(self) -> np.ndarray:
        """Tokens of each row of its shards, in order; -1 for rows never drawn (a packed
        version's short rows, which `blocks()` skips too)."""
        parts = []
        for _, path in self.shards:
            table = read_stream(path)
            if "num_tokens" in table.schema.names:
                column = table.column("num_tokens")
            else:
                column = pc.list_value_length(table.column("input_ids"))
            parts.append(column.to_numpy().astype(np.int64))
        tokens = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        seq_len = self.pack.get("seq_len")
        if seq_len and self.pack.get("kind", "tokens") != "conversations":
            tokens = np.where(tokens == seq_len, tokens, -1)
        return tokens

    def schema(self) -> list[dict[str, str]]:
        return list(self.version.manifest["schema"])


def build_recipes(mixture: Mixture) -> dict[int, Version]:
    """The recipe sources' versions, built now when missing (`curate.run`: a no-op when up to
    date), by their place in `sources`."""
    from curate.runner import run

    built = {}
    for i, spec in enumerate(mixture.sources):
        if spec.recipe is not None:
            with _located(mixture, ("sources", i, "recipe")):
                built[i] = run(mixture.base_dir / spec.recipe)
    return built


def open_sources(mixture: Mixture, built: dict[int, Version]) -> list[Source]:
    """Every source opened (held) and checked; `built`: the recipe sources' versions."""
    found = []
    for i, spec in enumerate(mixture.sources):
        at: tuple[str | int, ...] = ("sources", i)
        with _located(mixture, at):
            version = built[i] if i in built else _open(mixture, spec)
            found.append(_source(spec, at, version))
    check_alike(mixture, found)
    return found


@contextlib.contextmanager
def _located(mixture: Mixture, at: tuple[str | int, ...]) -> Iterator[None]:
    """A CurateError raised inside names mixture.yaml's file, line and the source's path."""
    try:
        yield
    except CurateError as exc:
        if not exc.located and exc.args:
            exc.args = (f"{mixture.where(at)}: {exc.args[0]}", *exc.args[1:])
            exc.located = True
        raise


def _open(mixture: Mixture, spec: MixSource) -> Version:
    from curate.version import open as open_version

    root = mixture.base_dir / spec.root if spec.root is not None else mixture.output_root()
    folder = root / str(spec.dataset)
    if not folder.is_dir():
        raise CurateError(f"no dataset {spec.dataset!r} in {root}")
    version = open_version(folder, str(spec.version))
    if version.dataset != spec.dataset or version.name != spec.version:
        raise CurateError(f"{version.path} is not {spec.dataset} {spec.version}")
    if version.fingerprint != spec.fingerprint:
        raise CurateError(
            f"{spec.dataset} {spec.version} has fingerprint {version.fingerprint[:16]}..., "
            f"not the {str(spec.fingerprint)[:16]}... the mixture pins: it is another build; "
            "pin the fingerprint `curate show` prints, or name its recipe"
        )
    return version


def _source(spec: MixSource, at: tuple[str | int, ...], version: Version) -> Source:
    manifest = version.manifest
    for stage in manifest["stages"]:
        details = stage.get("details") or {}
        if isinstance(details.get("tokenizer"), dict) or "chat_template" in details:
            break
    else:
        raise CurateError(
            f"{version.dataset} {version.name} holds no tokens (its recipe has no tokenize "
            "stage): a mixture draws tokens by weight"
        )
    from curate.loader.tokens import Tokens

    tokens = Tokens(version, split=spec.split)
    chat = (manifest.get("recipe") or {}).get("chat") is not None or "chat_template" in details
    return Source(spec.label, spec, at, version, tokens.tokenizer, stage, tokens.pack, chat)


def check_alike(mixture: Mixture, sources: list[Source]) -> None:
    """Refuse sources a trainer could not read as one stream, naming the two that differ."""
    first = sources[0]
    for other in sources[1:]:
        why = _difference(first, other)
        if why is not None:
            raise CurateError(
                f"{mixture.where(other.at)}: cannot mix {other.label} with {first.label}: {why}"
            )


def _difference(a: Source, b: Source) -> str | None:
    if a.chat != b.chat:
        chat, text = (a, b) if a.chat else (b, a)
        return f"{chat.label} holds chat records, {text.label} text"
    if a.tokenizer["fingerprint"] != b.tokenizer["fingerprint"]:
        return (
            f"tokenized with different tokenizers ({a.tokenizer.get('source')} "
            f"{str(a.tokenizer['fingerprint'])[:12]} vs {b.tokenizer.get('source')} "
            f"{str(b.tokenizer['fingerprint'])[:12]})"
        )
    if _ends(a.tokenizer) != _ends(b.tokenizer):
        return f"different BOS/EOS policies ({_policy(a.tokenizer)} vs {_policy(b.tokenizer)})"
    if a.pack.get("seq_len") != b.pack.get("seq_len") or a.pack.get("kind") != b.pack.get("kind"):
        return f"packed differently ({_packing(a.pack)} vs {_packing(b.pack)})"
    if a.tokenizer.get("id_type") != b.tokenizer.get("id_type"):
        return f"ids stored as {a.tokenizer.get('id_type')} vs {b.tokenizer.get('id_type')}"
    if a.schema() != b.schema():
        names = {c["name"]: c["type"] for c in a.schema()}
        other = {c["name"]: c["type"] for c in b.schema()}
        differ = sorted(set(names.items()) ^ set(other.items()))
        shown = ", ".join(f"{n} {t}" for n, t in differ[:4])
        return f"their columns differ ({shown}); keep the same fields in both recipes"
    return None


def _ends(tokenizer: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Whether BOS and EOS are added, and which ids (why the recipe chose so does not matter)."""
    policy = tokenizer.get("policy") or {}
    return {
        end: (policy[end].get("added"), policy[end].get("id"))
        for end in ("bos", "eos")
        if isinstance(policy.get(end), dict)
    }


def _policy(tokenizer: dict[str, Any]) -> str:
    ends = _ends(tokenizer)
    said = [f"{end} {'id ' + str(i) if added else 'none'}" for end, (added, i) in ends.items()]
    return ", ".join(said) or "-"


def _packing(pack: dict[str, Any]) -> str:
    return f"rows of {pack['seq_len']} tokens" if pack.get("seq_len") else "not packed"


def stream_type(sources: list[Source]) -> pa.DataType:
    return pa.uint32() if sources[0].tokenizer.get("id_type") == "uint32" else pa.uint16()
