"""Publish-time proof that a template is too large: TEMPLATE_TOO_LARGE.

What the parsed template states with constants alone is checked here, so a
bomb is refused when it is published rather than failing every send:

* nested loops over constant sizes (``range(100000)`` inside
  ``range(100000)``) whose product exceeds the iteration limit;
* literal text times the constant loops around it beyond the output limit;
* a ``range`` of constant size beyond the iteration limit;
* filters and methods with a constant width, count or format width that
  alone exceeds the limits (``'x'|center(10**9)``, ``'%0999999999d'``),
  and constant ``'x' * n`` or ``n ** e`` beyond the sandbox's bounds.

Anything depending on variables is left to the render budget at send time
(:mod:`tidings.templates.limits`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from jinja2 import nodes
from jinja2.nodes import Impossible

from tidings.templates.guards import MAX_ROUND_PRECISION, format_widths
from tidings.templates.limits import MAX_INT_BITS, RenderLimits
from tidings.templates.model import Problem
from tidings.templates.sandbox import MAX_POWER_EXPONENT, MAX_SEQUENCE_PRODUCT

CODE: Final[str] = "TEMPLATE_TOO_LARGE"

# Filters and str methods whose first argument is a width or count.
_WIDTH_FILTERS: Final[frozenset[str]] = frozenset({"center", "indent"})
_COUNT_FILTERS: Final[frozenset[str]] = frozenset({"batch", "slice"})
_WIDTH_METHODS: Final[frozenset[str]] = frozenset(
    {"center", "ljust", "rjust", "zfill", "expandtabs"}
)


def _problem(part: str, lineno: int | None, message: str) -> Problem:
    where = f"line {lineno}: " if lineno else ""
    return Problem(CODE, part, f"{where}{message}")


def _const(node: nodes.Node) -> Any:
    """The node's constant value, or ``Impossible``. ``*`` and ``**`` are not
    folded by the sandbox, so small integer ones are computed here."""
    if isinstance(node, nodes.Mul | nodes.Pow):
        left, right = _const(node.left), _const(node.right)
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right))
        if not ints:
            return Impossible
        if isinstance(node, nodes.Pow):
            if right < 0 or right > MAX_POWER_EXPONENT:
                return Impossible
            if left.bit_length() * right > MAX_INT_BITS:
                return Impossible
            return left**right
        if left.bit_length() + right.bit_length() > MAX_INT_BITS:
            return Impossible
        return left * right
    if isinstance(node, nodes.Neg):
        value = _const(node.node)
        return -value if isinstance(value, int) else Impossible
    if not isinstance(node, nodes.Expr):
        return Impossible
    try:
        return node.as_const()
    except Exception:  # Impossible, or the expression itself fails
        return Impossible


def _const_int(node: nodes.Node | None) -> int | None:
    value = Impossible if node is None else _const(node)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _is_range(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Name)
        and node.node.name == "range"
    )


def _range_length(call: nodes.Call) -> int | None:
    if call.kwargs or call.dyn_args or call.dyn_kwargs or not 1 <= len(call.args) <= 3:
        return None
    bounds = [_const_int(arg) for arg in call.args]
    if any(b is None for b in bounds):
        return None
    try:
        return len(range(*bounds))  # type: ignore[arg-type]
    except (ValueError, OverflowError):
        return None


def _static_length(node: nodes.Node) -> int | None:
    """How many items a loop over ``node`` runs, when constants say so."""
    if _is_range(node):
        return _range_length(node)  # type: ignore[arg-type]
    if isinstance(node, nodes.List | nodes.Tuple):
        return len(node.items)
    value = _const(node)
    if isinstance(value, str | list | tuple | dict):
        return len(value)
    return None


def _literal_chars(output: nodes.Output) -> int:
    return sum(
        len(child.data) if isinstance(child, nodes.TemplateData) else len(str(child.value))
        for child in output.nodes
        if isinstance(child, nodes.TemplateData | nodes.Const)
    )


def _children(node: nodes.Node, factor: int) -> Iterator[tuple[nodes.Node, int]]:
    """Child nodes with how often each runs, as far as constants say."""
    if isinstance(node, nodes.For):
        size = _static_length(node.iter)
        inner = factor * size if size is not None else factor
        yield node.target, factor
        yield node.iter, factor
        for child in node.body:
            yield child, inner
        if node.test is not None:
            yield node.test, inner
        for child in node.else_:
            yield child, factor
        return
    for child in node.iter_child_nodes():
        yield child, factor


def check_loops_and_output(part: str, ast: nodes.Template, limits: RenderLimits) -> list[Problem]:
    """Constant loop nesting beyond the iteration limit; constant text times
    its loops beyond the output limit."""
    problems: list[Problem] = []
    literal_total = 0
    stack: list[tuple[nodes.Node, int]] = [(ast, 1)]
    reported_loops = False
    while stack:
        node, factor = stack.pop()
        if isinstance(node, nodes.Output):
            literal_total += _literal_chars(node) * factor
        if isinstance(node, nodes.For) and not reported_loops:
            size = _static_length(node.iter)
            if size is not None and factor * size > limits.max_iterations:
                reported_loops = True
                problems.append(
                    _problem(
                        part,
                        node.lineno,
                        f"loops run {factor * size} times; at most "
                        f"{limits.max_iterations} iterations are allowed",
                    )
                )
        stack.extend(_children(node, factor))
    if literal_total > limits.max_output_bytes:
        problems.append(
            _problem(
                part,
                None,
                f"writes at least {literal_total} characters; a rendered part "
                f"may hold at most {limits.max_output_bytes} bytes",
            )
        )
    return problems


def _argument_problem(node: nodes.Node, limits: RenderLimits) -> str | None:
    """Why a single call or operator with constant arguments is too large."""
    if _is_range(node):
        size = _range_length(node)  # type: ignore[arg-type]
        if size is not None and size > limits.max_iterations:
            return f"range of {size} items; at most {limits.max_iterations} are allowed"
        return None
    first = None
    name = None
    fmt: Any = Impossible
    if isinstance(node, nodes.Filter):
        name, first = node.name, (node.args[0] if node.args else None)
        if node.name == "format" and node.node is not None:
            fmt = _const(node.node)
    elif isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
        name, first = node.node.attr, (node.args[0] if node.args else None)
        if name in ("format", "format_map"):
            fmt = _const(node.node.node)
        elif name not in _WIDTH_METHODS:
            name = None
    elif isinstance(node, nodes.Mod):
        fmt = _const(node.left)
    elif isinstance(node, nodes.Mul):
        values = (_const(node.left), _const(node.right))
        for seq, count in (values, values[::-1]):
            repeated = isinstance(seq, str | list | tuple) and isinstance(count, int)
            if repeated and len(seq) * count > MAX_SEQUENCE_PRODUCT:
                return f"repeats a sequence {count} times"
    elif isinstance(node, nodes.Pow):
        exponent = _const_int(node.right)
        if exponent is not None and abs(exponent) > MAX_POWER_EXPONENT:
            return f"exponent {exponent} is larger than {MAX_POWER_EXPONENT}"
    if isinstance(fmt, str):
        widest, _ = format_widths(fmt)
        if widest > limits.max_value_chars:
            return f"format width {widest} is larger than {limits.max_value_chars}"
    amount = _const_int(first)
    if name is None or amount is None:
        return None
    if name in _WIDTH_FILTERS | _WIDTH_METHODS and abs(amount) > limits.max_value_chars:
        return f"'{name}' width {amount} is larger than {limits.max_value_chars}"
    if name in _COUNT_FILTERS and amount > limits.max_iterations:
        return f"'{name}' count {amount} is larger than {limits.max_iterations}"
    if name == "round" and abs(amount) > MAX_ROUND_PRECISION:
        return f"'round' precision {amount} is larger than {MAX_ROUND_PRECISION}"
    return None


def check_constant_arguments(part: str, ast: nodes.Template, limits: RenderLimits) -> list[Problem]:
    """Filters, methods and operators whose constant arguments alone make
    the result too large."""
    problems: list[Problem] = []
    for node in ast.find_all((nodes.Filter, nodes.Call, nodes.Mod, nodes.Mul, nodes.Pow)):
        reason = _argument_problem(node, limits)
        if reason is not None:
            problems.append(_problem(part, node.lineno, reason))
    return problems


CHECKS: Final = (check_loops_and_output, check_constant_arguments)


def too_large(part: str, ast: nodes.Template, limits: RenderLimits) -> list[Problem]:
    """Every TEMPLATE_TOO_LARGE problem of one parsed part."""
    return [problem for check in CHECKS for problem in check(part, ast, limits)]
