"""Compile a revision's parts once and cache them by ``content_hash``.

Rendering 100k messages parses the template once: the LRU is keyed by the
content hash, so a new revision number with identical content shares the
compiled form. Each part is parsed in its sandbox environment
(:mod:`tidings.templates.sandbox`) and instrumented with the budget
counters (:mod:`tidings.templates.instrument`) before it is compiled. A
syntax error is cached too, so a broken revision is not re-parsed on every
render attempt.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, NamedTuple

from jinja2 import Template, TemplateSyntaxError, meta

from tidings.templates.instrument import instrument
from tidings.templates.model import TemplateRevision
from tidings.templates.sandbox import env_for_part

DEFAULT_CACHE_SIZE: Final[int] = 4096


def source_filename(part: str) -> str:
    """The file name a part is compiled under; tracebacks carry it, which is
    how a render error finds its line."""
    return f"<tidings:{part}>"


@dataclass(frozen=True)
class CompiledRevision:
    """A revision's parts compiled once; ``variables`` are the names referenced."""

    content_hash: str
    subject: Template | None
    body: Template | None
    html_body: Template | None
    variables: frozenset[str]
    # A syntax error found when compiling: (part, lineno, message). Cached too,
    # so a broken revision does not get re-parsed on every render attempt.
    syntax_error: tuple[str, int | None, str] | None = None


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    size: int
    maxsize: int


class RenderCache:
    """Thread-safe LRU of compiled revisions keyed by ``content_hash``."""

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[str, CompiledRevision] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, rev: TemplateRevision) -> CompiledRevision:
        key = rev.content_hash
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return found
            self.misses += 1
        compiled = _compile(rev)  # outside the lock; a racing duplicate is harmless
        with self._lock:
            self._items[key] = compiled
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return compiled

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.hits, self.misses, len(self._items), self.maxsize)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = 0
            self.misses = 0


_DEFAULT_CACHE: Final[RenderCache] = RenderCache()


def _sources(rev: TemplateRevision) -> dict[str, str | None]:
    return {"subject": rev.subject, "body": rev.body, "html_body": rev.html_body}


def _compile(rev: TemplateRevision) -> CompiledRevision:
    compiled: dict[str, Template | None] = {}
    variables: set[str] = set()
    for part, source in _sources(rev).items():
        if source is None:
            compiled[part] = None
            continue
        env = env_for_part(part)
        try:
            ast = env.parse(source, name=part, filename=source_filename(part))
            variables |= meta.find_undeclared_variables(ast) - set(env.globals)
            code = env.compile(instrument(ast), name=part, filename=source_filename(part))
        except TemplateSyntaxError as exc:
            return CompiledRevision(
                content_hash=rev.content_hash,
                subject=None,
                body=None,
                html_body=None,
                variables=frozenset(),
                syntax_error=(part, exc.lineno, exc.message or "syntax error"),
            )
        compiled[part] = env.template_class.from_code(env, code, env.make_globals(None))
    return CompiledRevision(
        content_hash=rev.content_hash,
        subject=compiled["subject"],
        body=compiled["body"],
        html_body=compiled["html_body"],
        variables=frozenset(variables),
    )


def compile_revision(rev: TemplateRevision, cache: RenderCache | None = None) -> CompiledRevision:
    """Compile (or fetch from the cache) a revision's templates."""
    return (cache or _DEFAULT_CACHE).get(rev)


def cache_info() -> CacheInfo:
    return _DEFAULT_CACHE.info()


def clear_cache() -> None:
    _DEFAULT_CACHE.clear()


__all__ = [
    "DEFAULT_CACHE_SIZE",
    "CacheInfo",
    "CompiledRevision",
    "RenderCache",
    "cache_info",
    "clear_cache",
    "compile_revision",
    "source_filename",
]
