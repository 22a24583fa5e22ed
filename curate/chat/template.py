"""The base model's chat template: found, compiled in a sandbox, rendered as Hugging Face does.

Templates are code from a model repository, so they run in Jinja's
`ImmutableSandboxedEnvironment`: no attribute access to Python internals, no mutation
of the messages. The environment is the one `transformers`' `apply_chat_template`
builds (`trim_blocks`, `lstrip_blocks`, loop controls, the `{% generation %}` tag,
`tojson` without ASCII escaping, `raise_exception`, its restricted `dict` and
`namespace`; transformers 5.24), and templates are called with
the same variables (`messages`, `tools`, `documents`, `add_generation_prompt`, and the
tokenizer's special tokens by name), so the rendered text is the text a model was
trained and is served with. `strftime_now` returns a date fixed by the recipe, not
the clock, so the same recipe renders the same text every day.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from curate.chat.budget import Budget, BudgetExceeded, TemplateFailed
from curate.errors import CurateError, shown
from curate.tokenizers.encoders import ModelDefaults, read_config, token_content
from curate.tokenizers.source import TokenizerSource

SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                "mask_token")  # fmt: skip


class TemplateRaised(Exception):
    """A template's own `raise_exception(message)`. Templates build the message from the
    conversation, so it never becomes a reason (`curate.reasons.template_failure`)."""


@dataclass(frozen=True)
class TemplateText:
    text: str
    origin: str  # the file it came from, and which named template

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def has_generation_tags(self) -> bool:
        return "{% generation %}" in self.text or "{%- generation %}" in self.text


def _from_config(path: Path, name: str) -> TemplateText | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CurateError(f"{path}: cannot be read as JSON: {exc}") from None
    found = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(found, list):  # named templates: [{name, template}]
        named = {t.get("name"): t.get("template") for t in found if isinstance(t, dict)}
        found = named.get(name)
        if found is None:
            raise CurateError(
                f"{shown(path)}: no chat template named {name!r} (has {sorted(map(str, named))})"
            )
    return TemplateText(found, f"{path}#{name}") if isinstance(found, str) else None


def find_template(named: str | None, base_dir: str, source: TokenizerSource,
                  name: str = "default") -> TemplateText:  # fmt: skip
    """The recipe's template (a .jinja file, a tokenizer_config.json, or a folder), else the
    tokenizer's: `chat_template.jinja` beside it, then its tokenizer_config.json."""
    if named is not None:
        path = Path(base_dir, named)
        if path.is_dir():
            candidates = [path / "chat_template.jinja", path / "tokenizer_config.json"]
        else:
            candidates = [path]
    else:
        folder = source.main.parent
        candidates = [folder / "chat_template.jinja"]
        candidates += [source.config] if source.config else [folder / "tokenizer_config.json"]
    for path in candidates:
        if not path.is_file():
            continue
        if path.suffix == ".json":
            found = _from_config(path, name)
            if found is not None:
                return found
            continue
        return TemplateText(path.read_text(encoding="utf-8"), str(path))
    raise CurateError(
        f"no chat template found (looked in {', '.join(shown(c) for c in candidates)}); "
        "name one with chat_template.template: a .jinja file or a tokenizer_config.json"
    )


def special_tokens_map(
    source: TokenizerSource, defaults: ModelDefaults | None = None
) -> dict[str, Any]:
    """What `transformers` passes a template as `bos_token`, `eos_token`, ... (strings):
    tokenizer_config.json's. A SentencePiece, tekken or tiktoken file without one still
    names its BOS and EOS (the tokenize stage's format defaults); those fill the gaps, so
    `{{ bos_token }}` never renders as nothing because a config file was not copied
    (a tokenizer.json: its config only, as transformers reads it)."""
    out = _config_tokens(source)
    if source.kind != "tokenizer.json" and defaults is not None:  # transformers reads a
        for key, value in (("bos_token", defaults.bos_token), ("eos_token", defaults.eos_token)):
            if value is not None:
                out.setdefault(key, value)
    return out


def _config_tokens(source: TokenizerSource) -> dict[str, Any]:
    cfg = read_config(source)
    out: dict[str, Any] = {}
    for key in SPECIAL_KEYS:
        value = token_content(cfg.get(key))
        if value is not None:
            out[key] = value
    extra = cfg.get("additional_special_tokens")
    if isinstance(extra, list):
        out["additional_special_tokens"] = [t for t in map(token_content, extra) if t]
    return out


class Renderer:
    """A compiled template; `render` returns the text and the `{% generation %}` spans."""

    def __init__(self, template: TemplateText, now: datetime, variables: dict[str, Any]) -> None:
        import jinja2
        import jinja2.ext

        def raise_exception(message: str) -> None:
            raise TemplateRaised(message)

        def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None,
                   separators: Any = None, sort_keys: bool = False) -> str:  # fmt: skip
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                              separators=separators, sort_keys=sort_keys)  # fmt: skip

        env = _environment_class()(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[_tracker_extension(), jinja2.ext.loopcontrols],
        )
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = now.strftime
        env.globals["dict"] = _TemplateDict()
        env.globals["namespace"] = _namespace_class()
        self.env = env
        self.compiled = env.from_string(template.text)
        self.variables = variables
        # what generate() would build from its keyword arguments and the globals on every
        # call (dict(ChainMap) costs more than a small template's rendering): made once
        self._context_vars = {**self.compiled.globals, "tools": None, "documents": None,
                              **variables}  # fmt: skip

    def render(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = False
    ) -> tuple[str, list[tuple[int, int]]]:
        """Raises `RenderRefused` (`curate.chat.budget`) when the rendering goes over its
        budget or the template's own code fails on these messages."""
        blocks: list[str] = []
        spans: list[tuple[int, int]] = []
        # Template.generate without its per-block generator: the same context, the same
        # root function, the same exception handling (handle_exception re-raises)
        context_vars = {**self._context_vars, "messages": messages,
                        "add_generation_prompt": add_generation_prompt}  # fmt: skip
        context = self.compiled.new_context(context_vars, shared=True)
        append = blocks.append
        budget = self.env.budget = Budget(messages)
        size, limit = 0, budget.max_chars
        with self.env.activate_tracker(blocks, spans):
            try:
                for block in self.compiled.root_render_func(context):
                    size += len(block)
                    if size > limit:
                        budget.output(size)
                        limit = budget.max_chars
                    append(block)
            except RecursionError:  # nesting the budgets did not see: never a crash
                raise BudgetExceeded("call_depth") from None
            except _TEMPLATE_FAULTS as exc:
                raise TemplateFailed(exc) from None
            except Exception:
                self.env.handle_exception()
        return "".join(blocks), spans


# what a template's own expressions raise on some values (`1 / 0`, `'a' * 1.5`)
_TEMPLATE_FAULTS = (ArithmeticError, LookupError, TypeError, ValueError)
# `loop`'s counters: ints and bools, each an attribute the sandbox would allow (public, not
# internal, the loop not a known mutable type), so answering them directly changes nothing
_LOOP_COUNTERS = frozenset(
    {"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0"}
)
_ENVIRONMENT: Any = None


def _environment_class() -> Any:
    """transformers' `ImmutableSandboxedEnvironment`, with `loop.index0`, `loop.first`, ...
    read without the sandbox's checks, whose answer for them is always yes: a template
    reads them once or twice per message, and the checks were a quarter of rendering's
    time on the chat_template benchmark. Every other attribute goes through the sandbox."""
    global _ENVIRONMENT
    if _ENVIRONMENT is not None:
        return _ENVIRONMENT
    from jinja2.runtime import LoopContext

    from curate.chat.sandbox import BudgetedSandbox

    class ChatTemplateEnvironment(BudgetedSandbox):
        def getattr(self, obj: Any, attribute: str) -> Any:
            if type(obj) is LoopContext and attribute in _LOOP_COUNTERS:
                return getattr(obj, attribute)
            return super().getattr(obj, attribute)

    _ENVIRONMENT = ChatTemplateEnvironment
    return _ENVIRONMENT


class _TemplateDict:
    """`dict` inside templates: calls and `fromkeys` only, no attribute access to the type."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)

    def __repr__(self) -> str:  # not the default's memory address: the same in every run
        return "<dict>"


def _namespace_class() -> Any:
    """Jinja's `namespace`, refusing underscore names (a way to CPython internals), as
    transformers' does."""
    import jinja2
    import jinja2.utils

    def check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, "
                f"but got {name!r}. Please rename the attribute."
            )

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            for name in dict(*rest, **kwargs):
                check(name)
            jinja2.utils.Namespace.__init__(self, *rest, **kwargs)

        def __setitem__(self, name: str, value: Any) -> None:
            check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

    return TemplateNamespace


_TRACKER: Any = None


def _tracker_extension() -> Any:
    """The `{% generation %}` tag as `transformers` defines it: the character spans its
    blocks produce, in the order they are rendered."""
    global _TRACKER
    if _TRACKER is not None:
        return _TRACKER
    import jinja2
    from jinja2.ext import Extension

    class AssistantTracker(Extension):
        tags = {"generation"}

        def __init__(self, environment: Any) -> None:
            super().__init__(environment)
            environment.extend(activate_tracker=self.activate_tracker)
            self._blocks: list[str] | None = None
            self._spans: list[tuple[int, int]] | None = None

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            call = self.call_method("_generation_support")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context: Any, caller: Any) -> str:
            rendered: str = caller()
            if self._blocks is not None and self._spans is not None:
                start = len("".join(self._blocks))
                self._spans.append((start, start + len(rendered)))
            return rendered

        @contextmanager
        def activate_tracker(
            self, blocks: list[str], spans: list[tuple[int, int]]
        ) -> Iterator[None]:
            self._blocks, self._spans = blocks, spans
            try:
                yield
            finally:
                self._blocks, self._spans = None, None

    _TRACKER = AssistantTracker
    return _TRACKER
