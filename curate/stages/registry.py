"""Finding stage classes by recipe name or by a user's dotted path, lazily.

Importing curate must not import Presidio, Ray or a tokenizer library, so built-in
stages are listed here by module path and imported only when a recipe names them.
"""

from __future__ import annotations

import difflib
import importlib
import inspect

from curate.errors import CurateError
from curate.stages.base import Stage

BUILTIN: dict[str, str] = {
    "normalize": "curate.stages.normalize:Normalize",
    "filter_length": "curate.stages.filter_length:FilterLength",
    "exact_dedup": "curate.stages.exact_dedup:ExactDedup",
    "minhash_dedup": "curate.stages.minhash_dedup:MinHashDedup",
    "line_dedup": "curate.stages.line_dedup:LineDedup",
    "tokenize": "curate.stages.tokenize:Tokenize",
    "quality_filter": "curate.stages.quality_filter:QualityFilter",
    "language_filter": "curate.stages.language_filter:LanguageFilter",
    "decontaminate": "curate.stages.decontaminate:Decontaminate",
    "pii": "curate.stages.pii:Pii",
    "chat_template": "curate.stages.chat_template:ChatTemplate",
    "classifier": "curate.stages.classifier:Classifier",
    "classifier_buckets": "curate.stages.classifier_buckets:ClassifierBuckets",
    "url_filter": "curate.stages.url_filter:UrlFilter",
}


def is_dotted_path(name: str) -> bool:
    return "." in name or ":" in name


def _import(target: str, shown: str) -> type[Stage]:
    module_name, _, attr = target.partition(":") if ":" in target else target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name == module_name.split(".")[0]:
            # the `curate` command does not import from the current folder (nor should it)
            hint = f"; install it, or put the folder holding '{exc.name}' on PYTHONPATH"
        raise CurateError(
            f"stage '{shown}': cannot import module '{module_name}': {exc}{hint}"
        ) from None
    obj = getattr(module, attr, None)
    if inspect.isclass(obj) and issubclass(obj, Stage):
        return obj
    raise CurateError(f"stage '{shown}': '{attr}' in '{module_name}' is not a curate Stage class")


def resolve(name: str) -> type[Stage]:
    """The stage class for a recipe name (`normalize`) or a dotted path (`mypkg.stages:MyStage`)."""
    if name in BUILTIN:
        return _import(BUILTIN[name], name)
    if is_dotted_path(name):
        return _import(name, name)
    hints = [f"'{h}'" for h in difflib.get_close_matches(name, BUILTIN, n=3)]
    known = ", ".join(sorted(BUILTIN))
    suggestion = f" (did you mean {' or '.join(hints)}?)" if hints else ""
    raise CurateError(
        f"unknown stage '{name}'{suggestion}; built-in stages: {known}; "
        "or give a dotted path to your own Stage class, e.g. 'mypkg.stages:MyStage'"
    )
