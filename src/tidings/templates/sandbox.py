"""The Jinja2 environments every template part is compiled and run in.

* :class:`TidingsSandbox` is Jinja2's ``ImmutableSandboxedEnvironment`` (the
  sandbox, plus no mutation of lists/dicts passed in as variables) with
  ``StrictUndefined``: using a variable that was not supplied is an error,
  never an empty string.
* Its hooks spend the render budget (:mod:`tidings.templates.limits`):
  every call is a step, ``*``, ``**``, ``+`` and ``%`` are bounded before
  Python computes them, and every printed expression passes
  :func:`_finalize`, which counts it and refuses ``None`` (a ``None`` reset
  link must not render as the text "None").
* Every filter and test is wrapped by :mod:`tidings.templates.instrument`;
  ``lipsum`` and ``pprint`` are removed. Call arguments, item keys and
  compared values that are containers are measured first.
* There is no loader, so ``include``, ``import`` and ``extends`` cannot reach
  anything (validation rejects them).
* ``body`` and ``subject`` are plain text and use :data:`TEXT_ENV` (no
  autoescaping: SMS and text/plain e-mail must not contain ``&amp;``);
  ``html_body`` uses :data:`HTML_ENV`, autoescaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from jinja2 import StrictUndefined
from jinja2.exceptions import SecurityError
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from tidings.templates.guards import check_format, guard_method
from tidings.templates.instrument import guard_filters, guard_tests
from tidings.templates.limits import (
    MAX_INT_BITS,
    RenderBudget,
    RenderLimitExceeded,
    counted,
    current,
)

MAX_SEQUENCE_PRODUCT: Final[int] = 100_000
MAX_POWER_EXPONENT: Final[int] = 100
# Integers from 2^61 - 1 on share hashes (Python hashes an int modulo that
# prime): `range(0, k * p, p)|unique` probes k^2 / 2 times in one call.
MAX_RANGE_VALUE: Final[int] = 2**53


class NoneOutput(Exception):
    """Raised by ``finalize`` when an expression printed ``None``."""


def _finalize(value: Any) -> Any:
    """Every printed expression passes here, in macros and blocks too: it is
    counted against the render's output budget."""
    if value is None:
        raise NoneOutput()
    budget = current()
    if isinstance(value, str):
        budget.produce(len(value))
    elif isinstance(value, float) or (isinstance(value, int) and value.bit_length() <= 64):
        budget.produce(24)  # at most this long printed; spares a str() per number
    else:
        budget.measure(value)
        budget.produce(len(str(value)))
    return value


def _measured(budget: RenderBudget, value: Any) -> None:
    if not isinstance(value, str | int | float | bool | type(None)):
        budget.measure(value)


def _range(*args: Any) -> range:
    if any(isinstance(arg, int) and abs(arg) > MAX_RANGE_VALUE for arg in args):
        raise RenderLimitExceeded("range")
    return safe_range(*args)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class TidingsSandbox(ImmutableSandboxedEnvironment):
    """The sandbox used for every template: bounded ``*``, ``**``, ``+`` and
    ``%``, and every call counted and checked against the render budget."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = current()
        if operator == "**" and isinstance(right, int) and abs(right) > MAX_POWER_EXPONENT:
            raise SecurityError("exponent too large")
        if _is_int(left) and _is_int(right):  # huge ints take one uninterruptible call
            bits = left.bit_length() * right if operator == "**" else 0
            if operator == "*":
                bits = left.bit_length() + right.bit_length()
            if bits > MAX_INT_BITS:
                raise RenderLimitExceeded("value")
        if operator == "+" and isinstance(left, str | list | tuple) and type(left) is type(right):
            budget.require(len(left) + len(right), "value")
        if operator == "%":
            check_format(budget, left, right if isinstance(right, tuple) else (right,))
            if isinstance(left, str) and isinstance(right, Mapping):
                budget.measure(right)  # '%(x)s' % mapping prints its values
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if (
                    isinstance(seq, str | list | tuple)
                    and isinstance(count, int)
                    and len(seq) * count > MAX_SEQUENCE_PRODUCT
                ):
                    raise SecurityError("sequence repetition too large")
        result = super().call_binop(context, operator, left, right)
        budget.check_value(result)
        return result

    def getitem(self, obj: Any, argument: Any) -> Any:
        # `d[key]` hashes the key: a tuple of shared tuples hashes every path.
        _measured(current(), argument)
        return super().getitem(obj, argument)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """Every call is a step: macros, ``caller()``, loop recursion, methods."""
        budget = current()
        budget.tick()
        if isinstance(__obj, LoopContext) and args:
            # `loop(children)` in a recursive for: the new level's items count too.
            args = (counted(args[0]), *args[1:])
        # An argument a call compares or hashes (`loop.changed(x)`,
        # `list.index(x)`) costs its full size, shared parts counted each time.
        for value in (*args, *kwargs.values()):
            _measured(budget, value)
        args = guard_method(budget, __obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        budget.check_value(result)
        return result


def _make_env(autoescape: bool) -> TidingsSandbox:
    env = TidingsSandbox(
        undefined=StrictUndefined,
        autoescape=autoescape,
        finalize=_finalize,
        auto_reload=False,
        cache_size=0,  # compiled templates are cached by content hash (compiled.py)
    )
    # pprint re-formats each nested level whole (depth x size in one call),
    # lipsum(n) writes n paragraphs in one call; no notification needs them.
    env.filters.pop("pprint", None)
    env.globals.pop("lipsum", None)
    env.globals["range"] = _range
    guard_filters(env.filters)
    guard_tests(env.tests)
    return env


TEXT_ENV: Final[TidingsSandbox] = _make_env(autoescape=False)
HTML_ENV: Final[TidingsSandbox] = _make_env(autoescape=True)


def env_for_part(part: str) -> TidingsSandbox:
    """The environment a part is rendered in: HTML autoescaped, the rest not."""
    return HTML_ENV if part == "html_body" else TEXT_ENV


__all__ = [
    "HTML_ENV",
    "MAX_POWER_EXPONENT",
    "MAX_SEQUENCE_PRODUCT",
    "TEXT_ENV",
    "NoneOutput",
    "TidingsSandbox",
    "env_for_part",
]
