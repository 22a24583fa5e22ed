"""The one exception type for problems a user can fix.

The CLI prints a `CurateError` as a single line with no traceback; every other
exception is a bug in curate and keeps its traceback.
"""

from __future__ import annotations


class CurateError(Exception):
    """A problem with the user's recipe, inputs or environment, with a message that names where."""
