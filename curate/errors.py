"""The one exception type for problems a user can fix.

The CLI prints a `CurateError` as a single line with no traceback; every other
exception is a bug in curate and keeps its traceback.

Code deep inside a run (input discovery, a stage resolving its tokenizer, the store
creating its folder) knows which part of the recipe it serves but not the recipe file:
it tags the error with a recipe path (`at`), and the run adds the file and line
(`Recipe.located`), so the user reads `recipe.yaml:4: inputs[1]: ...`.

A path in a message is `shown` from the folder the user is in, not the recipe's folder
that recipe paths start from, so it can be copied into the next command.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

RecipePath = tuple[str | int, ...]


class CurateError(Exception):
    """A problem with the user's recipe, inputs or environment, with a message that names where."""

    at: RecipePath | None = None  # the recipe part it concerns; its file and line not yet added
    located: bool = False  # the message already names the recipe file, line and path

    def __init__(self, *args: object, at: RecipePath | None = None) -> None:
        super().__init__(*args)
        if at is not None:
            self.at = at


class DiskFull(CurateError):
    """The output disk filled up; the staging folder is kept so the next run resumes."""


@contextlib.contextmanager
def recipe_part(*at: str | int) -> Iterator[None]:
    """Errors raised inside concern this part of the recipe (unless they already name one)."""
    try:
        yield
    except CurateError as exc:
        if exc.at is None:
            exc.at = at
        raise


def shown(path: str | os.PathLike[str]) -> str:
    """A path for a message: relative to the current folder when inside it, else absolute.
    A recipe's paths are relative to the recipe's folder, which is rarely where its user is
    (`curate run recipes/x.yaml`), so a path as the recipe wrote it cannot be copied."""
    full = os.path.abspath(path)
    try:
        relative = os.path.relpath(full, os.getcwd())
    except (OSError, ValueError):  # the current folder was removed; another drive
        return full
    return full if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative
