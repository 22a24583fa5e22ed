"""Jinja's immutable sandbox, charging each rendering's `Budget` (`curate.chat.budget`).

Where the counts come from: every `{% for %}` loop's items (the parsed template's loops
are wrapped in a counting filter before compiling, and a recursive loop's `loop(...)` in
the call hook), every call (`call`, which also tracks nesting and checks what the
amplifying string methods would build), the operators that build big values (`*`, `**`,
`%`, intercepted), the filters that do (`center`, `indent`, `join`, `replace`, `tojson`,
...), every value stored in a `namespace` (the only state a loop carries from one
iteration to the next), every block a macro or `{% set %}` joins (`concat`) and the output
(`Renderer.render`). `range` refuses more than jinja's MAX_RANGE items as a budget, not as
a crash. What would make two runs differ is not offered: the `random` filter and `lipsum`
are removed, and callables show a fixed text instead of their memory address.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable
from typing import Any

from jinja2 import nodes
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Cycler, Joiner

from curate.chat import budget as b
from curate.chat.budget import Budget, BudgetExceeded

COUNTED = "curate_counted"  # filters the parse step adds; a template naming them gains nothing
SIZED = "curate_sized"
_JINJA_KWARGS = ("_loop_vars", "_block_vars")  # compiled code's, not the template's
_CALLABLE = (types.BuiltinMethodType, types.FunctionType, types.MethodType)


class Method:
    """A function or method a template reached, shown as `<method NAME>`: its own repr
    holds a memory address, different in every process."""

    __slots__ = ("f",)

    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.f(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<method {getattr(self.f, '__name__', '')}>"


class FixedCycler(Cycler):
    def __repr__(self) -> str:
        return "<cycler>"


class FixedJoiner(Joiner):
    def __repr__(self) -> str:
        return "<joiner>"


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """`ImmutableSandboxedEnvironment` with budgets; `budget` is the current rendering's."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.budget = Budget()
        self.filters.pop("random", None)
        self.globals.pop("lipsum", None)
        self.globals.update(range=Method(self._range), cycler=FixedCycler, joiner=FixedJoiner)
        self.filters[COUNTED] = self._counted
        self.filters[SIZED] = self._sized

    # -- compiling: loops counted, namespace values sized --------------------------------

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        self._budget_filters()
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, COUNTED, [], [], None, None,
                                     lineno=loop.iter.lineno)  # fmt: skip
        for assign in tree.find_all(nodes.Assign):
            if isinstance(assign.target, nodes.NSRef):
                assign.node = nodes.Filter(assign.node, SIZED, [], [], None, None,
                                           lineno=assign.node.lineno)  # fmt: skip
        return tree

    def _budget_filters(self) -> None:
        """The filters that can build more than they are given, checked first; globals
        that are plain functions shown without their address. Done when a template is
        compiled, so the ones the caller set (`tojson`, `raise_exception`) are covered."""
        for name, check in _FILTER_CHECKS.items():
            found = self.filters.get(name)
            if found is not None and not getattr(found, "curate_budgeted", False):
                self.filters[name] = _budgeted_filter(self, found, check)
        for name, value in list(self.globals.items()):
            if isinstance(value, _CALLABLE):
                self.globals[name] = Method(value)

    def _counted(self, iterable: Iterable[Any]) -> Iterable[Any]:
        return self.budget.counted(iterable)

    def _sized(self, value: Any) -> Any:
        return self.budget.value(value)

    def _range(self, *args: Any) -> range:
        found = range(*args)
        try:
            n = len(found)
        except OverflowError:
            n = b.MAX_RANGE + 1
        if n > b.MAX_RANGE:
            raise BudgetExceeded("range")
        return found

    # -- rendering ------------------------------------------------------------------------

    def concat(self, parts: Iterable[str]) -> str:
        """What compiled code joins a macro's, a `{% set %}` block's or a filter block's
        output with: sized before it is joined."""
        if not isinstance(parts, list):
            parts = list(parts)
        self.budget.chars(sum(map(len, parts)))
        return "".join(parts)

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        budget = self.budget
        budget.step()
        kind = type(obj)
        if kind is Method:
            obj = obj.f
            kind = type(obj)
        if kind is types.BuiltinMethodType:
            if isinstance(obj.__self__, str) and obj.__name__ in _METHOD_CHECKS:
                args = _METHOD_CHECKS[obj.__name__](budget, obj.__self__, args, kwargs)
        elif kind is types.FunctionType:
            target = getattr(getattr(obj, "__wrapped__", None), "__self__", None)
            if isinstance(target, str):  # the sandbox's own str.format wrapper
                b.check_format(budget, target, [*args, *kwargs.values()])
        elif kind is LoopContext and args:  # a recursive loop's next level
            args = (budget.counted(args[0]), *args[1:])
        for arg in args:
            if type(arg) is not str or len(arg) > 4096:
                budget.value(arg)
        for name, arg in kwargs.items():
            if (type(arg) is not str or len(arg) > 4096) and name not in _JINJA_KWARGS:
                budget.value(arg)
        budget.depth += 1
        if budget.depth > b.MAX_DEPTH:
            raise BudgetExceeded("call_depth")
        try:
            found = super().call(context, obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        if type(found) is str:
            if len(found) > budget.max_chars:
                budget.chars(len(found))
        elif isinstance(found, (list, tuple)):
            budget.items(len(found))
        return found

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """`*`, `**` and `%`; on numbers (`loop.index0 % 2`) only `**` and `*` of two
        integers can grow, and nothing here is a step (loops bound how often it runs)."""
        if operator == "%":
            if isinstance(left, str):
                b.check_percent(self.budget, left, right)
        elif operator == "*":
            b.check_repeat(self.budget, left, right)
        else:
            b.check_power(self.budget, left, right)
        return self.binop_table[operator](left, right)

    def getattr(self, obj: Any, attribute: str) -> Any:
        try:  # the sandbox's own first step, without a call (the hot path: message.content)
            getattr(obj, attribute)
        except AttributeError:
            try:
                return obj[attribute]
            except (TypeError, LookupError):
                pass
        found = super().getattr(obj, attribute)  # an attribute, checked by the sandbox
        return Method(found) if type(found) in _CALLABLE else found

    def getitem(self, obj: Any, argument: Any) -> Any:
        try:  # the sandbox's own first step, without a call (the hot path: message['role'])
            return obj[argument]
        except (TypeError, LookupError):
            found = super().getitem(obj, argument)  # an attribute, checked by the sandbox
        return Method(found) if type(found) in _CALLABLE else found


# -- what amplifying methods and filters would build ---------------------------------------

Args = tuple[Any, ...]
Kwargs = dict[str, Any]
Check = Callable[[Budget, Any, Args, Kwargs], Args]


def _arg(args: Args, kwargs: Kwargs, i: int, name: str, default: Any) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


def _pad(budget: Budget, s: str, args: Args, kwargs: Kwargs) -> Args:
    width = _arg(args, kwargs, 0, "width", 0)
    if isinstance(width, int):
        budget.chars(width)
    return args


def _expandtabs(budget: Budget, s: str, args: Args, kwargs: Kwargs) -> Args:
    size = _arg(args, kwargs, 0, "tabsize", 8)
    if isinstance(size, int):
        budget.chars(size)
        budget.chars(len(s) + s.count("\t") * size)
    return args


def _replace(budget: Budget, s: str, args: Args, kwargs: Kwargs) -> Args:
    old, new = _arg(args, kwargs, 0, "old", None), _arg(args, kwargs, 1, "new", None)
    count = _arg(args, kwargs, 2, "count", -1)
    if isinstance(old, str) and isinstance(new, str) and isinstance(count, int):
        b.check_replace(budget, s, old, new, count)
    return args


def _join(budget: Budget, s: str, args: Args, kwargs: Kwargs) -> Args:
    if len(args) == 1 and not kwargs:
        items = list(args[0])
        b.check_join(budget, s, items)
        return (items,)
    return args


def _split(budget: Budget, s: str, args: Args, kwargs: Kwargs) -> Args:
    sep, most = _arg(args, kwargs, 0, "sep", None), _arg(args, kwargs, 1, "maxsplit", -1)
    b.check_split(budget, s, sep, most if isinstance(most, int) else -1)
    return args


def _splitlines(budget: Budget, s: str, args: Args, kwargs: Kwargs) -> Args:
    b.check_lines(budget, s, 0)
    budget.items(sum(s.count(c) for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029") + 1)
    return args


_METHOD_CHECKS: dict[str, Check] = {
    "ljust": _pad, "rjust": _pad, "center": _pad, "zfill": _pad, "expandtabs": _expandtabs,
    "replace": _replace, "join": _join, "split": _split, "rsplit": _split,
    "splitlines": _splitlines,
}  # fmt: skip


def _f_center(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    return (args[0], *_pad(budget, "", args[1:], kwargs))


def _f_indent(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    width = _arg(args, kwargs, 1, "width", 4)
    if isinstance(args[0], str):
        b.check_lines(budget, args[0], len(width) if isinstance(width, str) else int(width))
    return args


def _f_format(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    if isinstance(args[0], str):
        b.check_percent(budget, args[0], kwargs or args[1:])
    return args


def _f_join(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    items = list(args[0])
    sep = _arg(args, kwargs, 1, "d", "")
    b.check_join(budget, sep if isinstance(sep, str) else "", items)
    return (items, *args[1:])


def _f_replace(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    count = _arg(args, kwargs, 3, "count", None)
    if isinstance(args[0], str):
        _replace(budget, args[0], (*args[1:3], -1 if count is None else count), {})
    return args


def _f_wordwrap(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    width = _arg(args, kwargs, 1, "width", 79)
    wrap = _arg(args, kwargs, 3, "wrapstring", None)
    if isinstance(args[0], str) and isinstance(width, int):
        budget.chars(width)
        s = args[0]
        b.check_lines(budget, s, len(wrap or "\n") * (1 + len(s) // max(1, width)))
        # textwrap first splits the text into a list of chunks (each word, each run of
        # spaces, each hyphenated part), then loops over them in Python: at most two per
        # separator, counted without building anything
        budget.items(2 * sum(s.count(c) for c in " \t\n\r\x0b\x0c-") + 1)
    return args


def _f_items(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    """`batch` pads to `linecount` items, `slice` makes `slices` lists."""
    count = args[1] if len(args) > 1 else next(iter(kwargs.values()), 0)
    if isinstance(count, int):
        budget.items(count)
    return args


def _f_list(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    if isinstance(args[0], (str, list, tuple, dict)):
        budget.items(len(args[0]))
    return args


def _f_text(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    budget.value(args[0])
    return args


def _f_tojson(budget: Budget, args: Args, kwargs: Kwargs) -> Args:
    """JSON's text is the value's plus, per item, a separator and a new line indented by
    its depth."""
    indent = _arg(args, kwargs, 2, "indent", None)
    separators = _arg(args, kwargs, 3, "separators", None)
    width = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
    seps = sum(len(s) for s in separators if isinstance(s, str)) if separators else 2
    budget.chars(width)
    budget.chars(budget.text_size(args[0], per_item=seps + 1, per_level=width))
    return args


_FILTER_CHECKS: dict[str, Callable[[Budget, Args, Kwargs], Args]] = {
    "center": _f_center, "indent": _f_indent, "format": _f_format, "join": _f_join,
    "replace": _f_replace, "wordwrap": _f_wordwrap, "batch": _f_items, "slice": _f_items,
    "list": _f_list, "string": _f_text, "pprint": _f_text, "tojson": _f_tojson,
}  # fmt: skip


def _budgeted_filter(env: BudgetedSandbox, f: Callable[..., Any], check: Any) -> Any:
    """`f` with `check` on its value and arguments first, and its result sized after; the
    pass_context/pass_environment marking is kept (the wrapper gets that argument too)."""
    passed = 1 if getattr(f, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(f)
    def budgeted(*args: Any, **kwargs: Any) -> Any:
        budget = env.budget
        budget.step()
        args = (*args[:passed], *check(budget, args[passed:], kwargs))
        found = f(*args, **kwargs)
        if isinstance(found, str):
            budget.chars(len(found))
        return found

    budgeted.curate_budgeted = True  # type: ignore[attr-defined]
    return budgeted
