"""Counters compiled into every template, and filters that check their cost.

Jinja has no hook for a loop iteration, for the literal text an output
statement emits, or for the ``~`` operator, so the parsed template is
rewritten before it is compiled:

* every ``{% for %}`` iterates through ``tidings_loop``, one step each;
* every output statement first passes the length of its literal text to
  ``tidings_emit`` (expressions are counted by the environment's finalize);
* every ``a ~ b`` operand is measured by ``tidings_printable`` and the
  result passes through ``tidings_checked``;
* so is every compared value and every key of a dict literal: comparing
  or hashing a container costs its full size.

The internal filters take the context (``pass_context``) only so that Jinja
cannot fold them into constants at compile time. Every other filter is
wrapped to spend a step and run its guard (:mod:`tidings.templates.guards`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any, Final, cast

from jinja2 import nodes, pass_context
from jinja2.visitor import NodeTransformer

from tidings.templates.guards import FILTER_GUARDS, guard_filter_value
from tidings.templates.limits import counted, current

LOOP_FILTER: Final[str] = "tidings_loop"
EMIT_FILTER: Final[str] = "tidings_emit"
CHECK_FILTER: Final[str] = "tidings_checked"
PRINTABLE_FILTER: Final[str] = "tidings_printable"


@pass_context
def _loop(_context: Any, iterable: Iterable[Any]) -> Iterator[Any]:
    return counted(iterable)


@pass_context
def _emit(_context: Any, chars: int) -> str:
    current().produce(chars)
    return ""


@pass_context
def _checked(_context: Any, value: Any) -> Any:
    current().check_value(value)
    return value


@pass_context
def _printable(_context: Any, value: Any) -> Any:
    if not isinstance(value, str | int | float | None):
        current().measure(value)
    return value


INTERNAL_FILTERS: Final[dict[str, Callable[..., Any]]] = {
    LOOP_FILTER: _loop,
    EMIT_FILTER: _emit,
    CHECK_FILTER: _checked,
    PRINTABLE_FILTER: _printable,
}


def _guarded(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    skip = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0
    guard = FILTER_GUARDS.get(name)

    @functools.wraps(func)  # keeps jinja_pass_arg: Jinja passes the same first argument
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        if len(args) > skip:
            guard_filter_value(budget, name, args[skip])
        if guard is not None and len(args) > skip:
            replaced = guard(budget, *args[skip:], **kwargs)
            if replaced is not None:
                args = (*args[:skip], replaced, *args[skip + 1 :])
        result = func(*args, **kwargs)
        budget.check_value(result)
        return result

    return wrapper


def _guarded_test(func: Callable[..., Any]) -> Callable[..., Any]:
    # `select("equalto", x)` runs a test per item: each is a step, and a
    # container it compares is measured (`items|select` already was).
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        for value in (*args, *kwargs.values()):
            if isinstance(value, list | tuple | dict | set | frozenset):
                budget.measure(value)
        return func(*args, **kwargs)

    return wrapper


def guard_tests(tests: MutableMapping[str, Any]) -> None:
    for name, func in list(tests.items()):
        tests[name] = _guarded_test(func)


def guard_filters(filters: MutableMapping[str, Callable[..., Any]]) -> None:
    """Wrap every filter of an environment, then add the internal ones."""
    for name, func in list(filters.items()):
        filters[name] = _guarded(name, func)
    filters.update(INTERNAL_FILTERS)


def _internal(expr: nodes.Expr, name: str) -> nodes.Filter:
    return nodes.Filter(expr, name, [], [], None, None, lineno=expr.lineno)


def _literal_chars(output: nodes.Output) -> int:
    chars = 0
    for child in output.nodes:
        if isinstance(child, nodes.TemplateData):
            chars += len(child.data)
        elif isinstance(child, nodes.Const):
            chars += len(str(child.value))
    return chars


class _Instrument(NodeTransformer):
    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = _internal(cast(nodes.Expr, node.iter), LOOP_FILTER)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [_internal(operand, PRINTABLE_FILTER) for operand in node.nodes]
        return _internal(node, CHECK_FILTER)

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        # `a == b`, `a in b`: equal values that share parts (a list holding
        # one list twice, 40 levels deep) compare in 2^40 steps, in one call.
        self.generic_visit(node)
        node.expr = _internal(node.expr, PRINTABLE_FILTER)
        for operand in node.ops:
            operand.expr = _internal(operand.expr, PRINTABLE_FILTER)
        return node

    def visit_Pair(self, node: nodes.Pair) -> nodes.Node:
        self.generic_visit(node)  # a dict literal hashes its keys
        node.key = _internal(node.key, PRINTABLE_FILTER)
        return node

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        self.generic_visit(node)
        chars = _literal_chars(node)
        if chars:
            node.nodes.insert(0, _internal(nodes.Const(chars, lineno=node.lineno), EMIT_FILTER))
        return node


def instrument(ast: nodes.Template) -> nodes.Template:
    """Add the counters to a parsed template (in place) and return it."""
    environment = ast.environment
    assert environment is not None  # set by Environment.parse
    _Instrument().visit(ast)
    ast.set_environment(environment)
    return ast
