"""The one exception type for problems a user can fix.

The CLI prints a `CurateError` as a single line with no traceback; every other
exception is a bug in curate and keeps its traceback.

Code deep inside a run (input discovery, a stage resolving its tokenizer, the store
creating its folder) knows which part of the recipe it serves but not the recipe file:
it tags the error with a recipe path (`at`), and the run adds the file and line
(`Recipe.located`), so the user reads `recipe.yaml:4: inputs[1]: ...`.
"""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def recipe_part(*at: str | int) -> Iterator[None]:
    """Errors raised inside concern this part of the recipe (unless they already name one)."""
    try:
        yield
    except CurateError as exc:
        if exc.at is None:
            exc.at = at
        raise
