"""Checks run before a filter or a method call that could build a huge value
from small inputs in one C call (``'x'|center(10**9)``, ``'%*s' % (n, x)``,
``big.replace('a', big)``): the step counter cannot interrupt such a call,
so the result's size is bounded from the arguments before it is made.

Each guard takes the budget and the call's arguments (without the context
or environment Jinja passes first) and raises
:class:`~tidings.templates.limits.RenderLimitExceeded` or returns a
replacement for the first argument (an iterable it had to read to measure).

Why guards and not a render process killed at its deadline: a render runs
on the worker's thread, for every send; a process per render (or a pool of
killable ones) would add a round trip and a supervisor to the hot path for
the sake of calls whose cost can be known before they run. So every
str/bytes method, filter and test the sandbox exposes is classified below
(linear, guarded, or denied) and ``tests/security/test_render_kill.py``
fails on any it does not know. What no argument check can bound (comparing
or hashing values that share parts, ``[s] * k``) is bounded by measuring
the values first (:meth:`RenderBudget.measure` counts every reference).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from tidings.templates.limits import RenderBudget, RenderLimitExceeded

# `round(x, p)` with method "ceil"/"floor" computes 10**p.
MAX_ROUND_PRECISION: Final[int] = 100
# `text.strip(chars)` scans `chars` for each character it strips; textwrap
# copies what is left of a long word (or strips what is left of a long blank
# run) once per line it fills from it.
MAX_STRIP_WORK: Final[int] = 10**8

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")
_RUNS = re.compile(r"\S+|\s+")

Guard = Callable[..., Any]


def _number(digits: str) -> int:
    # int() refuses more than 4300 digits; anything over 9 is huge anyway.
    return int(digits) if len(digits) <= 9 else 10**9


def format_widths(fmt: str) -> tuple[int, bool]:
    """The widest width or precision written in a ``%``- or ``{}``-format
    string, and whether one is taken from the arguments (``*``, ``{w}``)."""
    widest, from_args = 0, False
    for match in _PERCENT_SPEC.finditer(fmt):
        for group in match.groups():
            if group == "*":
                from_args = True
            elif group:
                widest = max(widest, _number(group))
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        fields = []  # not a valid {}-format; the call itself will fail
    for _text, _name, spec, _conversion in fields:
        if spec:
            from_args |= "{" in spec
            for digits in _DIGITS.findall(spec):
                widest = max(widest, _number(digits))
    return widest, from_args


def _ints(values: Iterable[Any]) -> Iterable[int]:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            yield abs(value)
        elif isinstance(value, tuple | list):
            yield from _ints(value)
        elif isinstance(value, Mapping):
            yield from _ints(value.values())


def _is_text(value: Any) -> bool:
    return isinstance(value, str | bytes | bytearray)


def _as_text(budget: RenderBudget, value: Any) -> Any:
    """``value`` as text, refusing first a container whose text is too long
    (a list nested in itself 40 times over prints 2^40 items)."""
    if _is_text(value):
        return value
    budget.measure(value)
    return str(value)


def check_format(budget: RenderBudget, fmt: Any, args: Iterable[Any]) -> None:
    """A format string may not pad to more than the value limit, nor print
    an argument whose text is too long."""
    if not isinstance(fmt, str):
        return
    listed = list(args)
    for arg in listed:
        if not _is_text(arg):
            budget.measure(arg)
    widest, from_args = format_widths(fmt)
    budget.require(widest, "format width")
    if from_args:
        for number in _ints(listed):
            budget.require(number, "format width")


def _joined(budget: RenderBudget, items: Any, separator: Any) -> list[Any]:
    listed = list(items)
    size = len(listed) * len(_as_text(budget, separator))
    for item in listed:
        size += len(_as_text(budget, item))
        budget.require(size, "join")
    return listed


def _replaced(budget: RenderBudget, text: Any, old: Any, new: Any, count: Any = -1) -> None:
    text = _as_text(budget, text)
    if not _is_text(old) or not _is_text(new):
        return
    hits = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    budget.require(len(text) + hits * max(0, len(new) - len(old)), "replace")


def _stripped(budget: RenderBudget, text: Any, chars: Any = None, *_: Any, **__: Any) -> None:
    if isinstance(chars, str | bytes | bytearray) and len(text) * len(chars) > MAX_STRIP_WORK:
        raise RenderLimitExceeded("strip")


def _width(budget: RenderBudget, text: Any, width: Any = 0, *_: Any, **__: Any) -> None:
    if isinstance(width, int):
        budget.require(width, "width")


# ----------------------------------------------------------- filters


def _filter_center(budget: RenderBudget, value: Any, width: Any = 80) -> None:
    _width(budget, value, width)


def _filter_indent(budget: RenderBudget, value: Any, width: Any = 4, *_: Any, **__: Any) -> None:
    text = _as_text(budget, value)
    pad = width if isinstance(width, int) else len(_as_text(budget, width))
    budget.require(pad, "indent width")
    budget.require(len(text) + (text.count("\n") + 1) * pad, "indent")


def _filter_wordwrap(
    budget: RenderBudget,
    value: Any,
    width: Any = 79,
    break_long_words: Any = True,
    wrapstring: Any = None,
    *_: Any,
    **kwargs: Any,
) -> None:
    wrapstring = kwargs.get("wrapstring", wrapstring)
    text = _as_text(budget, value)
    columns = max(1, width if isinstance(width, int) else 1)
    lines = len(text) // columns + text.count("\n") + 1
    budget.require(len(text) + lines * len(_as_text(budget, wrapstring or "\n")), "wordwrap")
    longest = max(map(len, _RUNS.findall(text)), default=0) if isinstance(text, str) else 0
    if longest * longest > MAX_STRIP_WORK * columns:
        raise RenderLimitExceeded("wordwrap")


def _filter_join(
    budget: RenderBudget, value: Any, d: Any = "", attribute: Any = None, **kwargs: Any
) -> list[Any]:
    return _joined(budget, value, kwargs.get("d", d))


def _filter_replace(budget: RenderBudget, value: Any, old: Any, new: Any, count: Any = -1) -> None:
    _replaced(budget, value, old, new, -1 if count is None else count)


def _filter_format(budget: RenderBudget, value: Any, *args: Any, **kwargs: Any) -> None:
    check_format(budget, value, [*args, *kwargs.values()])


def _filter_count_arg(budget: RenderBudget, value: Any, count: Any = 1, *_: Any, **__: Any) -> None:
    # batch(linecount, fill) pads with `linecount` items; slice(n) makes n lists.
    if isinstance(count, int) and count > budget.limits.max_iterations:
        raise RenderLimitExceeded("count")


def _filter_round(budget: RenderBudget, value: Any, precision: Any = 0, *_: Any, **__: Any) -> None:
    if isinstance(precision, int) and abs(precision) > MAX_ROUND_PRECISION:
        raise RenderLimitExceeded("precision")


def _filter_sum(
    budget: RenderBudget, value: Any, attribute: Any = None, start: Any = 0, **kwargs: Any
) -> list[Any] | None:
    # Summing lists copies the growing total each time: quadratic.
    listed = list(value)
    total = sum(len(item) for item in listed if isinstance(item, list | tuple))
    if total and total * len(listed) > 100 * budget.limits.max_iterations:
        raise RenderLimitExceeded("sum")
    return listed


def _filter_trim(budget: RenderBudget, value: Any, chars: Any = None) -> None:
    _stripped(budget, _as_text(budget, value), chars)


FILTER_GUARDS: Final[Mapping[str, Guard]] = {
    "trim": _filter_trim,
    "center": _filter_center,
    "indent": _filter_indent,
    "wordwrap": _filter_wordwrap,
    "join": _filter_join,
    "replace": _filter_replace,
    "format": _filter_format,
    "batch": _filter_count_arg,
    "slice": _filter_count_arg,
    "round": _filter_round,
    "sum": _filter_sum,
}

# Filters that take a container apart without reading its items' contents.
# Every other filter may print, compare, hash or transform them (`string`,
# `sort`, `unique`, `select`...), so a container given to one is measured
# first: `[s] * 8000` holds one string but sorts like 8000 of them.
STRUCTURAL_FILTERS: Final[frozenset[str]] = frozenset(
    {
        "attr",
        "batch",
        "count",
        "d",
        "default",
        "first",
        "items",
        "join",
        "last",
        "length",
        "list",
        "random",
        "reverse",
        "slice",
        "sum",
    }
)


# Filters that read their value item by item in one call. A string is one
# item per character: one longer than the iteration limit would take more
# items than the render may, in a call the step counter cannot stop.
ITEMWISE_FILTERS: Final[frozenset[str]] = frozenset(
    """batch groupby list map max min reject rejectattr select selectattr slice
    sort sum unique""".split()  # noqa: SIM905
)


def guard_filter_value(budget: RenderBudget, name: str, value: Any) -> None:
    if not _is_text(value):
        if name not in STRUCTURAL_FILTERS:
            budget.measure(value)
    elif name in ITEMWISE_FILTERS and len(value) > budget.limits.max_iterations:
        raise RenderLimitExceeded("iterations")


# ----------------------------------------------------------- methods


def _method_expandtabs(budget: RenderBudget, text: Any, tabsize: Any = 8, **kwargs: Any) -> None:
    size = kwargs.get("tabsize", tabsize)
    if isinstance(size, int):
        tabs = text.count("\t" if isinstance(text, str) else b"\t")
        budget.require(len(text) + tabs * size, "expandtabs")


def _method_join(budget: RenderBudget, separator: Any, items: Any) -> list[Any]:
    return _joined(budget, items, separator)


def _method_format(budget: RenderBudget, fmt: Any, *args: Any, **kwargs: Any) -> None:
    check_format(budget, fmt, [*args, *kwargs.values()])


def _method_translate(budget: RenderBudget, text: Any, table: Any) -> None:
    if isinstance(table, Mapping):
        longest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
        budget.require(len(text) * longest, "translate")


STRING_METHOD_GUARDS: Final[Mapping[str, Guard]] = {
    "strip": _stripped,
    "lstrip": _stripped,
    "rstrip": _stripped,
    "center": _width,
    "ljust": _width,
    "rjust": _width,
    "zfill": _width,
    "expandtabs": _method_expandtabs,
    "replace": _replaced,
    "join": _method_join,
    "format": _method_format,
    "format_map": _method_format,
    "translate": _method_translate,
}


# Codecs are an open set of algorithms, some quadratic in pure Python
# (punycode, idna: minutes for 20,000 characters): no template needs one.
DENIED_METHODS: Final[frozenset[str]] = frozenset({"encode", "decode"})

# Linear in their inputs (a container is measured first), and every result
# is checked (check_value); Markup's own too. Audited by timing adversarial
# inputs at n, 2n and 4n characters.
LINEAR_METHODS: Final[frozenset[str]] = frozenset(
    """capitalize casefold count endswith escape find fromhex hex index isalnum
    isalpha isascii isdecimal isdigit isidentifier islower isnumeric
    isprintable isspace istitle isupper lower maketrans partition removeprefix
    removesuffix rfind rindex rpartition rsplit split splitlines startswith
    striptags swapcase title unescape upper""".split()  # noqa: SIM905
)
LINEAR_FILTERS: Final[frozenset[str]] = frozenset(
    """abs attr capitalize count d default dictsort e escape filesizeformat first
    float forceescape groupby int items last length list lower map max min
    random reject rejectattr reverse safe select selectattr sort string
    striptags title tojson truncate unique upper urlencode urlize wordcount
    xmlattr""".split()  # noqa: SIM905
)
# Every test is wrapped to spend a step and measure its arguments.
LINEAR_TESTS: Final[frozenset[str]] = frozenset(
    """!= < <= == > >= boolean callable defined divisibleby eq equalto escaped
    even false filter float ge greaterthan gt in integer iterable le lessthan
    lower lt mapping ne none number odd sameas sequence string test true
    undefined upper""".split()  # noqa: SIM905
)


def guard_method(
    budget: RenderBudget, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """Check a call of a ``str``/``bytes`` method; returns the arguments to
    call it with (an iterable to join is read once, here)."""
    owner = getattr(method, "__self__", None)
    if owner is None:  # the sandbox hands out str.format wrapped
        owner = getattr(getattr(method, "__wrapped__", None), "__self__", None)
    if not isinstance(owner, str | bytes | bytearray):
        return args
    name = getattr(method, "__name__", "")
    if name in DENIED_METHODS:
        raise RenderLimitExceeded(name)
    guard = STRING_METHOD_GUARDS.get(name)
    if guard is None:
        return args
    if guard is _method_format and name == "format_map":
        mapping = args[0] if args else {}
        guard(budget, owner, *(mapping.values() if isinstance(mapping, Mapping) else ()))
        return args
    replaced = guard(budget, owner, *args, **kwargs)
    if replaced is not None and args:
        return (replaced, *args[1:])
    return args
