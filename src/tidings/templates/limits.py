"""What one render may cost: loop iterations, output and time.

A template is tenant input, and so are the variables it is rendered with.
Without bounds, ``{% for a in range(100000) %}{% for b in range(100000) %}``
or a doubling ``{% set ns.s = ns.s ~ ns.s %}`` exhausts the memory or the
time of every worker that claims the intent (DESIGN invariant 11).

One :class:`RenderBudget` covers one :func:`tidings.templates.render.render`
call and is reached through a context variable, because the hooks that spend
it (the sandbox's ``call`` and binary operators, the filters, the loop and
output counters compiled into the template) are called by Jinja without a
way to pass it along. Each worker thread renders in its own context.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from jinja2.utils import Namespace

# An integer larger than this many bits is refused: Python computes huge
# powers and products in one uninterruptible call.
MAX_INT_BITS: Final[int] = 65_536


@dataclass(frozen=True)
class RenderLimits:
    """The bounds of one render (settings ``TIDINGS_TEMPLATE_MAX_*``).

    ``max_iterations`` counts every loop iteration and every call (macros,
    ``caller()``, loop recursion, methods, filters) of the whole render.
    ``max_output_bytes`` bounds each rendered part (UTF-8); text produced
    inside macros and blocks counts too, up to ``8 x`` that. ``max_seconds``
    is checked at each counted step.
    """

    max_iterations: int = 100_000
    max_output_bytes: int = 256 * 1024
    max_seconds: float = 1.0

    @property
    def max_value_chars(self) -> int:
        """The longest string (or rendered container) an expression may build."""
        return 4 * self.max_output_bytes

    @property
    def max_produced_chars(self) -> int:
        """All text produced by output statements, wherever it ends up."""
        return 8 * self.max_output_bytes


DEFAULT_LIMITS: Final[RenderLimits] = RenderLimits()


class RenderLimitExceeded(Exception):
    """A render went past one of its bounds. ``what`` names which one
    (iterations, output, time, value, argument); never a value."""

    def __init__(self, what: str) -> None:
        super().__init__(f"render limit exceeded: {what}")
        self.what = what


class RenderBudget:
    """The counters of one render."""

    __slots__ = ("deadline", "kept", "limits", "produced", "sizes", "steps")

    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.steps = 0
        self.produced = 0
        self.deadline = time.monotonic() + limits.max_seconds
        # Containers measured so far, by id, kept alive so no id is reused:
        # the sandbox lets no template change a list or dict once built,
        # so `x in skus` in a loop measures `skus` once.
        self.sizes: dict[int, int] = {}
        self.kept: list[Any] = []

    def tick(self) -> None:
        """One loop iteration or call."""
        self.steps += 1
        if self.steps > self.limits.max_iterations:
            raise RenderLimitExceeded("iterations")
        if time.monotonic() > self.deadline:
            raise RenderLimitExceeded("time")

    def produce(self, chars: int) -> None:
        """Text an output statement emitted (top level, macro or block)."""
        self.produced += chars
        if self.produced > self.limits.max_produced_chars:
            raise RenderLimitExceeded("output")

    def require(self, size: int, what: str) -> None:
        """Refuse before building a value of (an upper bound of) ``size`` chars."""
        if size > self.limits.max_value_chars:
            raise RenderLimitExceeded(what)

    def check_value(self, value: Any) -> None:
        """Refuse a value an operation just built that is already too large."""
        if isinstance(value, str | bytes | bytearray):
            self.require(len(value), "value")
        elif isinstance(value, list | tuple | dict | set | frozenset):
            if len(value) > self.limits.max_iterations:
                raise RenderLimitExceeded("value")
        elif isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise RenderLimitExceeded("value")

    def measure(self, value: Any) -> None:
        """Refuse a container whose text form would be too large, without
        building it. Shared references count each time (as ``str()`` and
        ``==`` visit them), so a list nested in itself 40 times over is
        refused, not printed; each shared part is measured once."""
        limit = self.limits.max_value_chars
        if _text_size(value, limit, self.sizes, self.kept) > limit:
            raise RenderLimitExceeded("value")


_SHORT = (int, float, type(None))  # a short repr, no parts
_LEAVES = (str, *_SHORT)


def _parts(value: Any) -> list[Any] | None:
    if isinstance(value, dict | Mapping):
        return [*value.keys(), *value.values()]
    if isinstance(value, Namespace):  # prints as its attributes
        attrs = object.__getattribute__(value, "_Namespace__attrs")
        return [*attrs.keys(), *attrs.values()]
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    return None


def _leaf_size(value: Any) -> int:
    if isinstance(value, str | bytes | bytearray):
        return len(value) + 2
    return 24  # numbers, None, objects: a short repr


def _text_size(value: Any, limit: int, sizes: dict[int, int], kept: list[Any]) -> int:
    """About ``len(str(value))``, or some number past ``limit``: a depth-first
    walk that sizes each distinct container once, by id. A container met
    again before its size is known contains itself. Sizes of containers
    that hold no namespace (the one thing a template can change) stay in
    ``sizes`` for the rest of the render, ``kept`` keeping their ids."""
    known = sizes.get(id(value))
    if known is not None:
        return known
    local: dict[int, int] = {}  # this walk's sizes, namespaces included
    changeable: set[int] = set()  # namespaces, and what holds one
    pending: set[int] = set()  # containers whose parts are being sized
    stack: list[tuple[Any, list[Any] | None]] = [(value, None)]
    while stack:
        item, parts = stack.pop()
        if parts is not None:  # every part is sized: size the container
            total, held = 2, isinstance(item, Namespace)
            for part in parts:
                if isinstance(part, str):
                    total += len(part) + 2
                elif isinstance(part, _SHORT):
                    total += 24
                else:
                    key = id(part)
                    total += sizes.get(key) or local.get(key) or _leaf_size(part)
                    held = held or key in changeable
            if total > limit:
                return total
            local[id(item)] = total
            if held:
                changeable.add(id(item))
            else:
                sizes[id(item)] = total
                kept.append(item)
            pending.discard(id(item))
            continue
        parts = _parts(item)
        if parts is None or id(item) in local or id(item) in sizes:
            continue
        if id(item) in pending:
            return limit + 1
        pending.add(id(item))
        stack.append((item, parts))
        stack.extend(
            (part, None)
            for part in parts
            if not isinstance(part, _LEAVES) and id(part) not in sizes and id(part) not in local
        )
    known = local.get(id(value))
    return known if known is not None else _leaf_size(value)


_CURRENT: ContextVar[RenderBudget | None] = ContextVar("tidings_render_budget", default=None)


def current() -> RenderBudget:
    """The budget of the render in progress. Outside one (Jinja folding a
    constant expression while compiling) a fresh default budget, so the
    argument checks still refuse ``'x'|center(10**9)`` at compile time."""
    found = _CURRENT.get()
    return found if found is not None else RenderBudget(DEFAULT_LIMITS)


@contextmanager
def budget_scope(limits: RenderLimits) -> Iterator[RenderBudget]:
    budget = RenderBudget(limits)
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """``iterable``, spending one step of the current budget per item."""
    budget = current()
    for item in iterable:
        budget.tick()
        yield item
