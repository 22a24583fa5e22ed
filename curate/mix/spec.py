"""`mixture.yaml`: which sources a mixture draws from, by how many tokens, and how often.

```yaml
name: pretrain-mix            # the mixture's dataset name: <output.root>/<name>/vN
budget: 1000000               # tokens in the whole mixture
seed: 1
sources:
  - name: web                 # a published version, pinned by its fingerprint
    dataset: web
    version: v3
    fingerprint: 3f2a...      # 64 hex digits, as `curate show` prints it
    weight: 0.9               # share of the budget's tokens (weights are relative)
  - name: code                # or a recipe, built (or found up to date) first
    recipe: code.yaml
    weight: 0.1
    max_epochs: 2             # the budget may repeat this source at most twice
output: {root: curated}
```
Validation errors name the file, line and path (`mixture.yaml:9: sources[1].weight: ...`),
all at once, the way a recipe's do (`curate.recipe`), before anything is read or written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from curate.errors import CurateError
from curate.yaml_lines import format_loc, line_of, load_file

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MixSource(_Strict):
    """One source: a published version pinned by (dataset, version, fingerprint), or a recipe."""

    name: str | None = Field(
        None, pattern=_NAME, description="The source's label; default: its dataset's name."
    )
    dataset: str | None = Field(None, pattern=_NAME, description="A published version's dataset.")
    version: str | None = Field(None, pattern=r"^v[0-9]+$", description="Its version: v1, v2, ...")
    fingerprint: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="Its fingerprint (64 hex digits): a version that is not this one is refused.",
    )
    root: str | None = Field(
        None, description="The output root holding the dataset; default: the mixture's own."
    )
    recipe: str | None = Field(
        None, description="A recipe to build (or find up to date), relative to this file."
    )
    split: str | None = Field(None, description="A version made with split: which split to draw.")
    weight: float = Field(gt=0, description="Share of the budget's tokens (relative weights).")
    max_epochs: float = Field(
        1.0, gt=0, description="How many times the budget may draw this source's tokens."
    )

    @model_validator(mode="after")
    def _one_kind(self) -> MixSource:
        pinned = [self.dataset, self.version, self.fingerprint]
        if self.recipe is not None:
            if any(v is not None for v in pinned) or self.root is not None:
                raise ValueError("give either recipe, or dataset, version and fingerprint")
        elif any(v is None for v in pinned):
            raise ValueError(
                "names no source: give recipe, or dataset, version and fingerprint together"
            )
        return self

    @property
    def label(self) -> str:
        if self.name is not None:
            return self.name
        if self.dataset is not None:
            return self.dataset
        return Path(str(self.recipe)).stem


class MixOutput(_Strict):
    root: str = Field("curated", description="Folder holding <name>/vN; relative to this file.")
    fsync: bool = Field(True, description="fsync the index and manifest before publishing.")
    file_mode: str = Field("0640", pattern=r"^0?[0-7]{3}$", description="Mode of files written.")
    dir_mode: str = Field("0750", pattern=r"^0?[0-7]{3}$", description="Mode of folders written.")


class Mixture(_Strict):
    """A weighted mixture of tokenized versions under an exact token budget."""

    name: str = Field(pattern=_NAME, description="The mixture's dataset name.")
    sources: list[MixSource] = Field(min_length=1, description="The sources, in order.")
    budget: int = Field(gt=0, description="Tokens in the whole mixture.")
    seed: int = Field(0, description="Seeds each source's per-epoch order of samples.")
    output: MixOutput = Field(default_factory=MixOutput)

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _source: str | None = PrivateAttr(default=None)
    _node: yaml.Node | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _labels(self) -> Mixture:
        labels = [s.label for s in self.sources]
        twice = sorted({x for x in labels if labels.count(x) > 1})
        if twice:
            raise ValueError(f"sources share the name {twice[0]!r}: give each its own name:")
        if re.fullmatch(r"v\d+", self.name):
            raise ValueError(f"name {self.name!r} is named like a version: choose another")
        return self

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    @property
    def source(self) -> str | None:
        return self._source

    def where(self, at: tuple[str | int, ...]) -> str:
        line = line_of(self._node, at)
        source = self._source or "<mixture>"
        return f"{source}:{line}: {format_loc(at)}" if line else f"{source}: {format_loc(at)}"

    def output_root(self) -> Path:
        return (self._base_dir / self.output.root).resolve()

    def resolved(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(
        cls, data: Any, *, source: str = "<mixture>", base_dir: Path | None = None
    ) -> Mixture:
        return _validate(data, source, None, base_dir or Path.cwd())

    @classmethod
    def load(cls, path: str | Path) -> Mixture:
        """Read and validate a mixture file; raise CurateError naming file, YAML path and line."""
        path = Path(path)
        data, node = load_file(path, "mixture")
        return _validate(data, str(path), node, path.parent)


def _message(err: Any) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return f"unknown key '{err['loc'][-1]}'"
    if kind == "missing":
        return "is required"
    if kind == "string_pattern_mismatch":
        return f"{err['input']!r} does not match {ctx.get('pattern')}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return msg[0].lower() + msg[1:] if msg else msg


def _validate(data: Any, source: str, node: yaml.Node | None, base_dir: Path) -> Mixture:
    if not isinstance(data, dict):
        raise CurateError(f"{source}: a mixture must be a mapping with name, budget and sources")
    try:
        mixture = Mixture.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = line_of(node, loc) if node is not None else None
            where = f"{source}:{line}" if line else source
            lines.append(f"{where}: {format_loc(loc) if loc else '(mixture)'}: {_message(err)}")
        raise CurateError("\n".join(lines)) from None
    mixture._base_dir = Path(base_dir).resolve()
    mixture._source = source
    mixture._node = node
    return mixture
