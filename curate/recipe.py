"""Recipes: YAML (safe loading only) into a typed, validated `Recipe`.

Validation errors name the recipe file, the YAML path and its line
(`recipe.yaml:7: stages[1].normalize.form: must be one of NFC, NFKC`), all of them at
once, and are raised before anything is read or written. Stage parameters are
validated by each stage's own `Params` model, the same models that generate
`schemas/recipe.schema.json` and that the manifest records.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from curate.cache.options import CacheOptions, as_options, cache_schema
from curate.chat.spec import ChatInput
from curate.errors import CurateError
from curate.examples.options import ExamplesOptions, examples_schema
from curate.examples.options import as_options as examples_options
from curate.io.batches import TEXT
from curate.output.splits import SplitSpec
from curate.quarantine_limits import OnError, on_error_schema
from curate.sizes import ByteSize
from curate.stages.base import Stage, StageParams
from curate.stages.chain import build_stages
from curate.stages.registry import resolve
from curate.yaml_lines import format_loc, line_of, load_file

FIELD_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "float32": pa.float32(),
    "bool": pa.bool_(),
    "list<string>": pa.list_(pa.string()),
}

Problem = tuple[tuple[str | int, ...], str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OutputSpec(_Strict):
    """Where versions are written and how."""

    root: str = Field("curated", description="Folder holding <name>/vN; relative to the recipe.")
    shard_size: ByteSize = Field(256 * 10**6, description="Target size of each Arrow shard.")
    rejected: bool = Field(True, description="Write rejected/ with each removed document's id.")
    stats: bool = Field(
        True,
        description="Collect statistics while running (statistics.json in each version: "
        "per stage, documents, characters, lengths and tokens in fixed bins, and each "
        "stage's own figures); false leaves them out.",
    )
    examples: ExamplesOptions = Field(
        True,  # a boolean stands for the default count, or none
        validate_default=True,
        json_schema_extra=examples_schema,
        description="Removed documents kept per stage and reason in each version's "
        "examples/ (their text through the recipe's pii stage): true, false, or a mapping.",
    )
    fsync: bool = Field(True, description="fsync shards and manifest before publishing.")
    check_space: bool = Field(True, description="Refuse to start when the disk looks too small.")
    file_mode: str = Field("0640", pattern=r"^0?[0-7]{3}$", description="Mode of files written.")
    dir_mode: str = Field("0750", pattern=r"^0?[0-7]{3}$", description="Mode of folders written.")
    cache: CacheOptions = Field(
        True,  # a boolean stands for {enabled: ...}
        validate_default=True,
        json_schema_extra=cache_schema,
        description="The stage cache in `<dataset>/.cache/stages`: on or off, or a mapping "
        "of the settings below. Never changes the output.",
    )

    @field_validator("cache", mode="before")
    @classmethod
    def _cache(cls, value: Any) -> Any:
        return as_options(value)

    @field_validator("examples", mode="before")
    @classmethod
    def _examples(cls, value: Any) -> Any:
        return examples_options(value)


class EngineSpec(_Strict):
    """How partitions are scheduled; never changes the output."""

    kind: Literal["local", "ray"] = Field("local", description="Scheduler: this machine, or Ray.")
    workers: int | None = Field(None, ge=1, description="Worker processes; default: CPU count.")
    address: str | None = Field(None, description="Ray cluster address (kind: ray).")


class StageSpec(BaseModel):
    """One validated entry of a recipe's stage list."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    params: StageParams

    @property
    def stage_class(self) -> type[Stage]:
        return resolve(self.name)

    def to_dict(self) -> dict[str, Any]:
        return {self.name: self.params.model_dump(mode="json")}


def _pydantic_problems(exc: ValidationError, prefix: tuple[str | int, ...]) -> list[Problem]:
    problems: list[Problem] = []
    for err in exc.errors():
        loc = prefix + tuple(err["loc"])
        kind, ctx = err["type"], err.get("ctx") or {}
        if kind == "stage_problems":
            problems.extend(ctx["problems"])
            continue
        if kind == "literal_error":
            expected = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
            msg = f"must be one of {expected}"
        elif kind == "extra_forbidden":
            msg = f"unknown key '{loc[-1]}'"
        elif kind == "missing":
            msg = "is required"
        elif kind == "list_type":
            given = err["input"]
            example = f"[{given}]" if isinstance(given, str) else "one '- item' line per entry"
            msg = f"must be a list, e.g. {example}"
        elif kind == "string_pattern_mismatch" and loc == ("name",):
            msg = (
                f"{err['input']!r} is not a dataset name: use letters, digits, '.', '_' and '-', "
                "starting with a letter or digit (it names a folder)"
            )
        else:
            msg = err["msg"]
            msg = msg.removeprefix("Value error, ")
            msg = msg[0].lower() + msg[1:] if msg else msg
        problems.append((loc, msg))
    return problems


def _unknown_key_hint(
    problems: list[Problem], models: dict[tuple[str | int, ...], type[BaseModel]]
) -> list[Problem]:
    out = []
    for loc, msg in problems:
        model = models.get(loc[:-1])
        if msg.startswith("unknown key") and model is not None:
            known = list(model.model_fields)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            msg += f" (did you mean '{close[0]}'?)" if close else f"; known: {', '.join(known)}"
        out.append((loc, msg))
    return out


def build_stage(entry: Any, index: int) -> StageSpec:
    """A stage list entry (`{name: params}`, a StageSpec, or a Stage) as a StageSpec."""
    if isinstance(entry, StageSpec):
        return entry
    if isinstance(entry, Stage):
        return StageSpec(name=type(entry).name, params=entry.params)
    loc: tuple[str | int, ...] = ("stages", index)
    if not isinstance(entry, dict) or len(entry) != 1:
        raise _StageProblems(
            [(loc, "must be a mapping with one key, the stage name: {normalize: {form: NFC}}")]
        )
    name, params = next(iter(entry.items()))
    try:
        cls = resolve(str(name))
    except CurateError as exc:
        raise _StageProblems([(loc, str(exc))]) from None
    if params is None:
        params = {}
    if isinstance(params, StageParams):
        return StageSpec(name=str(name), params=params)
    if not isinstance(params, dict):
        raise _StageProblems([((*loc, name), "parameters must be a mapping")])
    try:
        return StageSpec(name=str(name), params=cls.Params.model_validate(params))
    except ValidationError as exc:
        problems = _pydantic_problems(exc, (*loc, name))
        raise _StageProblems(_unknown_key_hint(problems, {(*loc, name): cls.Params})) from None


def shape_problems(stages: list[StageSpec], chat: bool) -> list[Problem]:
    """Stages that cannot work on the recipe's records (text, or chat with `chat:`), and
    `roles` given where there are no messages to choose from."""
    problems: list[Problem] = []
    for i, spec in enumerate(stages):
        loc: tuple[str | int, ...] = ("stages", i, spec.name)
        shapes = spec.stage_class.shapes
        if chat and "chat" not in shapes:
            problems.append(
                (loc, "works on text documents, but this recipe reads chat records (chat:)")
            )
        elif not chat and "text" not in shapes:
            problems.append(
                (loc, "works on chat records, but this recipe reads text (no chat: key)")
            )
        elif not chat and getattr(spec.params, "roles", None) is not None:
            problems.append(
                ((*loc, "roles"), "chooses messages of chat records; this recipe reads text")
            )
    return problems


class _StageProblems(CurateError, ValueError):  # a user error outside a recipe too (Pipeline)
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(f"{format_loc(loc)}: {msg}" for loc, msg in problems))
        self.problems = problems


class Recipe(_Strict):
    """A whole curation run: inputs, the ordered stages, where and how to write."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Dataset name.")
    inputs: list[str] = Field(min_length=1, description="Files, folders or globs, in order.")
    text_field: str = Field("text", description="Input field holding the document text.")
    id_field: str | None = Field(
        None, description="Input field holding a stable id; derived when absent."
    )
    fields: dict[str, Literal[tuple(FIELD_TYPES)]] = Field(  # type: ignore[valid-type]
        default_factory=dict, description="Metadata fields to keep, with their types."
    )
    chat: ChatInput | None = Field(
        None,
        description="Chat or instruction records (messages, ShareGPT, Alpaca) read into a "
        "`messages` column in place of text: {shape: auto}.",
    )
    input_identity: Literal["stat", "content"] = Field(
        "stat",
        description="Inputs count as unchanged by path, size and mtime (nothing read), or by "
        "content hash (read once, cached by path and stat).",
    )
    on_error: OnError = Field(
        "quarantine",  # a mode stands for {mode: ...}
        validate_default=True,
        json_schema_extra=on_error_schema,
        description="Bad records: set aside in quarantine/ (failing the run when too many are), "
        "or stop the run at the first; a mode, or a mapping of the settings below.",
    )
    partition_size: ByteSize = Field(
        8 * 10**6,
        description="Target input bytes per partition, the unit of work: small, so that every "
        "worker has work on one large file; boundaries depend on each file and this size "
        "only, never on the number of workers.",
    )
    batch_size: ByteSize = Field(
        8 * 2**20, description="Text bytes per record batch: memory per worker vs overhead."
    )
    max_document_bytes: ByteSize = Field(
        64 * 2**20,
        ge=1,
        description="Larger documents (UTF-8 bytes of the text, or of a conversation's "
        "contents) go to quarantine/ as document_too_large, and so does a longer JSONL line, "
        "skipped unread with its line number: what one document may cost a worker in memory "
        "is bounded.",
    )
    stages: list[StageSpec] = Field(default_factory=list, description="Stages, in order.")
    split: SplitSpec | None = Field(
        None,
        description="Held-out splits by a seeded hash of each document's id, written so that "
        "load_from_disk gives a DatasetDict: {validation: 0.01}.",
    )
    output: OutputSpec = Field(default_factory=OutputSpec)
    engine: EngineSpec = Field(default_factory=EngineSpec)

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _source: str | None = PrivateAttr(default=None)
    _node: yaml.Node | None = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _not_a_version_name(cls, value: str) -> str:
        if re.fullmatch(r"v\d+", value):  # <root>/v1 would read as a version, not a dataset
            raise ValueError(
                f"{value!r} is named like a version (v<digits>): a dataset folder holds its "
                "versions under such names, so choose another dataset name"
            )
        return value

    @field_validator("stages", mode="before")
    @classmethod
    def _stages(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        specs, problems = [], []
        for i, entry in enumerate(value):
            try:
                specs.append(build_stage(entry, i))
            except _StageProblems as exc:
                problems.extend(exc.problems)
        if problems:
            raise PydanticCustomError(
                "stage_problems",
                "{message}",
                {"problems": problems, "message": str(_StageProblems(problems))},
            )
        return specs

    @field_validator("on_error", mode="before")
    @classmethod
    def _on_error(cls, value: Any) -> Any:
        return {"mode": value} if isinstance(value, str) else value

    @property
    def on_error_policy(self) -> OnError:
        """`on_error` as its mapping, whichever form the recipe used."""
        return self.on_error

    @model_validator(mode="after")
    def _record_shape(self) -> Recipe:
        problems = shape_problems(self.stages, chat=self.chat is not None)
        if problems:
            raise PydanticCustomError(
                "stage_problems",
                "{message}",
                {"problems": problems, "message": str(_StageProblems(problems))},
            )
        return self

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    @property
    def source(self) -> str | None:
        return self._source

    def with_base_dir(
        self, base_dir: Path, source: str | None = None, node: yaml.Node | None = None
    ) -> Recipe:
        self._base_dir = Path(base_dir).resolve()
        self._source = source
        self._node = node
        return self

    def where(self, at: tuple[str | int, ...]) -> str:
        """`recipe.yaml:4: inputs[1]`: the file, line and path of a part of this recipe."""
        line = line_of(self._node, at)
        source = self._source or "<recipe>"
        return f"{source}:{line}: {format_loc(at)}" if line else f"{source}: {format_loc(at)}"

    @contextlib.contextmanager
    def located(self) -> Iterator[None]:
        """A CurateError raised inside that concerns a part of this recipe (`at`) names the
        recipe file, line and path in its message, so the user sees where to fix it."""
        try:
            yield
        except CurateError as exc:
            if exc.at is not None and not exc.located and exc.args:
                message = str(exc.args[0])
                if exc.at[0] == "stages" and len(exc.at) > 2:  # "pii: ..." under stages[1].pii
                    message = message.removeprefix(f"{exc.at[2]}: ")
                exc.args = (f"{self.where(exc.at)}: {message}", *exc.args[1:])
                exc.located = True
            raise

    def output_root(self) -> Path:
        return (self._base_dir / self.output.root).resolve()

    def keep_fields(self) -> dict[str, pa.DataType]:
        return {name: FIELD_TYPES[kind] for name, kind in self.fields.items()}

    def build_stages(self) -> list[Stage]:
        """The recipe's stages, each told its position. Readers put the recipe's `text_field`
        into the `text` column, so that is the column stages read in a run; with `chat:` they
        put conversations into `messages`, and text stages work on message contents."""
        return build_stages(
            self.stages,
            text_field=TEXT,
            chat=self.chat is not None,
            base_dir=str(self.base_dir),
            stats=self.output.stats,
            examples=self.examples_per_reason(),
        )

    def examples_per_reason(self) -> int:
        """Removed documents a run keeps per stage and reason (`curate.examples.options`)."""
        return self.output.examples.per_reason_for(spec.name for spec in self.stages)

    def resolved(self) -> dict[str, Any]:
        """The recipe with all defaults filled in, as JSON-ready data (recorded in the manifest)."""
        data = self.model_dump(mode="json", exclude={"stages"})
        data["stages"] = [spec.to_dict() for spec in self.stages]
        return data

    @classmethod
    def from_dict(
        cls, data: Any, *, source: str = "<recipe>", base_dir: Path | None = None
    ) -> Recipe:
        return _validate(data, source, None, base_dir or Path.cwd())

    @classmethod
    def load(cls, path: str | Path) -> Recipe:
        """Read and validate a recipe file; raise CurateError naming file, YAML path and line."""
        path = Path(path)
        data, node = load_file(path, "recipe")
        return _validate(data, str(path), node, path.parent)


def _validate(data: Any, source: str, node: yaml.Node | None, base_dir: Path) -> Recipe:
    if not isinstance(data, dict):
        raise CurateError(f"{source}: a recipe must be a mapping with name, inputs and stages")
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        problems = _unknown_key_hint(
            _pydantic_problems(exc, ()),
            {
                (): Recipe,
                ("output",): OutputSpec,
                ("engine",): EngineSpec,
                ("split",): SplitSpec,
                ("on_error",): OnError,
                ("output", "cache"): CacheOptions,
            },
        )
        lines = []
        for loc, msg in problems:
            line = line_of(node, loc) if node is not None else None
            where = f"{source}:{line}" if line else source
            lines.append(f"{where}: {format_loc(loc)}: {msg}")
        raise CurateError("\n".join(lines)) from None
    return recipe.with_base_dir(base_dir, source, node)
