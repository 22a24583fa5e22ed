"""docs/api.md claims only what the code has: every signature it writes out names real
parameters with their real defaults (it may leave new ones out; it may not invent any)."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from typing import Any

from conftest import REPO

import curate
from curate.loader import TokenBlocks, Tokens, open_tokens

API = (REPO / "docs" / "api.md").read_text(encoding="utf-8")

DOCUMENTED: dict[str, Callable[..., Any]] = {
    "curate.run": curate.run,
    "curate.prepare": curate.prepare,
    "curate.open": curate.open,
    "open_tokens": open_tokens,
    "Pipeline": curate.Pipeline.__init__,
    "add": curate.Pipeline.add,
    "recipe": curate.Pipeline.recipe,
    "run": curate.Pipeline.run,
    "blocks": Tokens.blocks,
    "rows": Tokens.rows,
    "check_tokenizer": Tokens.check_tokenizer,
    "to_arrow": curate.Version.to_arrow,
    "to_polars": curate.Version.to_polars,
    "to_dataset": curate.Version.to_dataset,
    "split_shard_paths": curate.Version.split_shard_paths,
    "blocks.torch": TokenBlocks.torch,
    "Recipe.from_dict": curate.Recipe.from_dict,
}


def same(default: str, value: Any) -> bool:
    """A default as the page writes it (`None`, `0`, `"LATEST"`, `no_progress`) is the code's."""
    try:
        return bool(ast.literal_eval(default) == value)
    except (ValueError, SyntaxError):
        return default == getattr(value, "__name__", None)


def test_every_signature_in_the_api_page_is_true() -> None:
    checked = set()
    for name, fn in DOCUMENTED.items():
        real = inspect.signature(fn).parameters
        for args in re.findall(rf"`{re.escape(name)}\(([^`]*)\)(?: -> [^`]+)?`", API):
            for arg in filter(None, (a.strip() for a in re.split(r",\s+", args))):
                if arg in ("*", "...") or arg.startswith("**"):
                    continue
                key, _, default = arg.partition("=")
                assert key in real, f"{name}: docs/api.md names {key!r}, the code has not"
                if default and default != "...":
                    assert same(default, real[key].default), (name, key, default)
            checked.add(name)
    assert checked == set(DOCUMENTED), f"not found in docs/api.md: {set(DOCUMENTED) - checked}"
