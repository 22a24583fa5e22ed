"""How much work one rendering of a chat template may do, counted, never timed.

A template is code from a model repository: a loop over `range(99999)` inside another, a
string multiplied by 10**9 or a macro calling itself would hang a worker, fill its memory
or crash the run. Every rendering gets a `Budget` sized from its conversation (so a long
conversation is never refused for being long), and the sandbox (`curate.chat.sandbox`)
charges it: loop iterations, calls and intercepted operators are steps; calls nest to a
fixed depth; every string, list or integer a template builds, and what it outputs, has a
size limit checked *before* the operation that would build it. Counts depend only on the
template and the record, so a record over budget is over budget on every machine and with
any number of workers; the stage removes it with the reason `template_budget_exceeded`
and the budget's name, never content.

One clock remains, and it can only fail the run: work that no count bounds well (a
comparison on a long string inside a long loop) is stopped when one rendering runs for
`WALL_SECONDS`, as an error of the run naming the template, never a record's fate.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from curate.errors import CurateError
from curate.reasons import TEMPLATE_BUDGET, TEMPLATE_RUNTIME_ERROR

MAX_STEPS = 1_000_000  # loop iterations, calls and intercepted operators, per rendering ...
STEPS_PER_MESSAGE = 1_000  # ... plus this many per message of the conversation
MAX_DEPTH = 32  # nested calls: macros, caller(), recursive loops
MAX_CHARS = 4 * 2**20  # characters of any string built, and of the output, per rendering ...
CHARS_PER_INPUT_CHAR = 8  # ... plus this many per character of the conversation
MAX_ITEMS = 2**20  # items of a list built by a filter, method or operator ...
ITEMS_PER_INPUT_CHAR = 1  # ... plus one per character of the conversation
MAX_NESTING = 64  # lists and dicts inside each other (str() and tojson recurse)
MAX_INT_BITS = 2**16  # integers beyond ~20,000 digits: Python will not even print them
MAX_RANGE = 100_000  # jinja's own sandbox limit, which transformers' templates run under
WALL_SECONDS = 300.0  # one rendering, on the clock: fails the run (see the docstring)
_CLOCK_EVERY = 2**14  # steps between two looks at the clock


class RenderRefused(Exception):
    """A rendering the stage removes the record for, with `reason` (fixed words, never
    content). Deliberately not a `TemplateError`: a template's own errors stay apart."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BudgetExceeded(RenderRefused):
    """A rendering went over budget; `which` names the budget."""

    def __init__(self, which: str) -> None:
        super().__init__(TEMPLATE_BUDGET(budget=which))
        self.which = which


class TemplateFailed(RenderRefused):
    """The template's own code failed on this record (`1 / 0`, `'a' * 1.5`, `int` of a
    word): a fact about the template and the record, like a `raise_exception`; the reason
    names the exception's type only (its message may quote the record)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(TEMPLATE_RUNTIME_ERROR(error=type(exc).__name__))


class TemplateTooSlow(CurateError):
    """One rendering ran past `WALL_SECONDS`: the run fails, the record is not judged."""


class Budget:
    """The counters of one rendering and its limits, sized from the conversation. Limits
    start at their fixed part; the conversation's share is added (once) the first time one
    is reached, so a rendering that stays small never measures its conversation."""

    __slots__ = ("_clock_at", "_deadline", "_messages", "_sizes", "depth", "max_chars",
                 "max_items", "max_steps", "steps")  # fmt: skip

    def __init__(self, messages: Iterable[Mapping[str, Any]] = ()) -> None:
        self.steps = 0
        self.depth = 0
        self.max_steps = MAX_STEPS
        self.max_chars = MAX_CHARS
        self.max_items = MAX_ITEMS
        self._messages: Iterable[Mapping[str, Any]] | None = messages
        self._clock_at = _CLOCK_EVERY
        self._deadline = 0.0
        # text_size of containers already measured, kept alive so their ids stay theirs
        # (templates cannot mutate lists or dicts in the immutable sandbox)
        self._sizes: dict[int, tuple[Any, int, int]] = {}

    def _grow(self) -> None:
        """Add the conversation's share to the limits (once)."""
        if self._messages is None:
            return
        n_messages = chars = 0
        for message in self._messages:
            n_messages += 1
            chars += sum(len(v) for v in message.values() if isinstance(v, str))
        self._messages = None
        self.max_steps += STEPS_PER_MESSAGE * n_messages
        self.max_chars += CHARS_PER_INPUT_CHAR * chars
        self.max_items += ITEMS_PER_INPUT_CHAR * chars

    def step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps >= self._clock_at:
            self._tick()

    def _tick(self) -> None:
        if self.steps > self.max_steps:
            self._grow()
            if self.steps > self.max_steps:
                raise BudgetExceeded("steps")
        self._clock_at = min(self.steps + _CLOCK_EVERY, self.max_steps + 1)
        now = time.monotonic()
        if not self._deadline:
            self._deadline = now + WALL_SECONDS
        elif now > self._deadline:
            raise TemplateTooSlow(
                f"one chat template rendering ran for more than {WALL_SECONDS:.0f} s "
                f"within its budgets ({self.steps} steps): the template is hostile or "
                "broken; the run stops rather than judge records by the clock"
            )

    def chars(self, n: int) -> None:
        """Refuse a string of `n` characters before it is built."""
        if n > self.max_chars:
            self._grow()
            if n > self.max_chars:
                raise BudgetExceeded("string_size")

    def items(self, n: int) -> None:
        if n > self.max_items:
            self._grow()
            if n > self.max_items:
                raise BudgetExceeded("sequence_size")

    def output(self, n: int) -> None:
        """The output reached `n` characters (the render loop checks against max_chars)."""
        if n > self.max_chars:
            self._grow()
            if n > self.max_chars:
                raise BudgetExceeded("output_size")

    def value(self, value: Any) -> Any:
        """Refuse a value whose text would be over budget (what `str`, `tojson` or the
        output would make of it); returns it."""
        if isinstance(value, str):
            self.chars(len(value))
        elif isinstance(value, (list, tuple, dict)):
            self.items(len(value))
            self.chars(self.text_size(value))
        elif isinstance(value, int):
            self.int_bits(value.bit_length())
        return value

    def int_bits(self, bits: int) -> None:
        if bits > MAX_INT_BITS:
            raise BudgetExceeded("integer_size")

    def text_size(self, value: Any, per_item: int = 0, per_level: int = 0) -> int:
        """About the length of `str(value)` (a little over), without building it: containers
        are walked (every 16 items a step), shared parts counted each time they appear, and
        the walk stops as soon as the size is over budget; nesting deeper than MAX_NESTING
        (which `str` and `tojson` would recurse through) is refused. With `per_item` and
        `per_level`: JSON's text, where each item adds a separator and a line indented by
        its depth."""
        if isinstance(value, str):
            return len(value)
        plain = not per_item and not per_level
        found = self._sizes.get(id(value)) if plain else None
        if found is not None:
            return found[1]
        total, deepest, walked = 0, 0, 0
        stack: list[tuple[Any, int]] = [(value, 0)]
        while stack:
            if total > self.max_chars:
                self._grow()
                if total > self.max_chars:
                    break
            v, depth = stack.pop()
            walked += 1
            total += per_item + per_level * depth
            if isinstance(v, str):
                total += len(v) + 2
                continue
            known = self._sizes.get(id(v)) if plain and v is not value else None
            if known is not None:
                total += known[1]
                deepest = max(deepest, depth + known[2])
            elif isinstance(v, (list, tuple, dict)):
                deepest = max(deepest, depth + 1)
                if deepest > MAX_NESTING:
                    raise BudgetExceeded("nesting_depth")
                if isinstance(v, dict):
                    total += 2 + 4 * len(v)
                    stack.extend((k, depth + 1) for k in v)
                    stack.extend((x, depth + 1) for x in v.values())
                else:
                    total += 2 + 2 * len(v)
                    stack.extend((x, depth + 1) for x in v)
            elif isinstance(v, int):
                total += v.bit_length() // 3 + 2
            else:
                total += 32
        self.step(walked // 16)
        if plain and isinstance(value, (list, tuple, dict)) and len(value) > 16:
            self._sizes[id(value)] = (value, total, deepest)
        return total

    def counted(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """A loop's items, each a step."""
        for item in iterable:
            self.steps += 1
            if self.steps >= self._clock_at:
                self._tick()
            yield item


# -- what an operation would build, checked before it runs -------------------------------

_FORMAT_NUMBER = re.compile(r"\d+")
_PERCENT_SPEC = re.compile(r"%[^%a-zA-Z]*")
_BRACE_SPEC = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def _widths(budget: Budget, specs: Iterable[str]) -> int:
    """The largest width or precision written in format specs (refused over budget)."""
    widest = 0
    for spec in specs:
        for number in _FORMAT_NUMBER.findall(spec):
            if len(number) > 9:
                raise BudgetExceeded("string_size")
            widest = max(widest, int(number))
    budget.chars(widest)
    return widest


def _args_size(budget: Budget, args: Iterable[Any]) -> int:
    biggest = 0
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool):
            budget.chars(abs(arg))  # a width taken from the arguments ('{:{}}', '%*d')
        biggest = max(biggest, budget.text_size(arg))
    return biggest


def check_percent(budget: Budget, fmt: str, args: Any) -> None:
    """`fmt % args`: each conversion at most as wide as its width or its biggest argument."""
    values = args.values() if isinstance(args, Mapping) else args
    values = values if isinstance(values, (tuple, list, type({}.values()))) else (args,)
    widest = _widths(budget, _PERCENT_SPEC.findall(fmt))
    budget.chars(len(fmt) + fmt.count("%") * (widest + _args_size(budget, values)))


def check_format(budget: Budget, fmt: str, args: Iterable[Any]) -> None:
    """`fmt.format(...)`: likewise, per replacement field."""
    widest = _widths(budget, _BRACE_SPEC.findall(fmt))
    budget.chars(len(fmt) + fmt.count("{") * (widest + _args_size(budget, args)))


def check_repeat(budget: Budget, left: Any, right: Any) -> None:
    """`seq * n`, `n * seq`, `int * int`."""
    for seq, n in ((left, right), (right, left)):
        if isinstance(n, int) and isinstance(seq, (str, list, tuple)):
            n = max(n, 0)
            if not isinstance(seq, str):
                budget.items(len(seq) * n)
            budget.chars(budget.text_size(seq) * n)
            return
    if isinstance(left, int) and isinstance(right, int):
        budget.int_bits(left.bit_length() + right.bit_length())


def check_power(budget: Budget, base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent > MAX_INT_BITS:
            raise BudgetExceeded("integer_size")
        budget.int_bits(base.bit_length() * exponent)


def check_replace(budget: Budget, s: str, old: str, new: str, count: int = -1) -> None:
    n = len(s) + 1 if old == "" else s.count(old)
    if count >= 0:
        n = min(n, count)
    budget.chars(len(s) + n * max(0, len(new) - len(old)))


def check_join(budget: Budget, sep: str, items: list[Any]) -> None:
    budget.items(len(items))
    size = sum(budget.text_size(i) for i in items)
    budget.chars(size + len(sep) * max(0, len(items) - 1))


def check_split(budget: Budget, s: str, sep: Any = None, maxsplit: int = -1) -> None:
    n = (len(s) + 1) // 2 + 1 if not isinstance(sep, str) or not sep else s.count(sep) + 1
    if maxsplit >= 0:
        n = min(n, maxsplit + 1)
    budget.items(n)


def check_lines(budget: Budget, s: str, insert: int) -> None:
    """Text that gets `insert` characters at every line (indent, wordwrap, expandtabs)."""
    lines = sum(s.count(c) for c in _LINE_BREAKS) + 1
    budget.chars(len(s) + lines * insert)
