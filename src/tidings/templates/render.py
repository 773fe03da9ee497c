"""Render template revisions safely and fast.

Decisions (see also docs):

* Every template is evaluated in Jinja2's ``ImmutableSandboxedEnvironment``
  (the sandbox, plus no mutation of lists/dicts passed in as variables), with
  ``StrictUndefined``: using a variable that was not supplied is an error,
  never an empty string. ``{{ x }}`` where ``x`` is ``None`` is also an error
  (a ``None`` reset link must not render as the text "None").
* ``body`` is plain text for both channels and is rendered **without**
  autoescaping (SMS and text/plain e-mail must not contain ``&amp;``).
  An e-mail revision may carry ``html_body``, an HTML alternative rendered
  **with** autoescaping; use ``|safe`` only on trusted template text.
* Templates are self-contained: there is no loader, so ``include``,
  ``import`` and ``extends`` cannot reach anything (validation rejects them).
* ``*`` and ``**`` are bounded so a template cannot allocate unbounded memory.
* A revision is compiled once and cached by ``content_hash`` (LRU); rendering
  100k messages parses the template once.
* A rendered subject has CR/LF collapsed to spaces (no header injection).
* :class:`RenderError` names the template, revision, part, line and, for an
  undefined variable, the variable name - never a value or rendered text. It
  is raised outside the original ``except`` block, so the Jinja exception
  (whose message may quote a value used as a key) is not chained onto it.
"""

from __future__ import annotations

import re
import threading
import traceback
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, UndefinedError, meta
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tidings.templates.model import (
    DEFAULT_LOCALE,
    RenderError,
    RevisionNotFoundError,
    TemplateRevision,
    locale_language,
    normalize_locale,
)

MAX_SEQUENCE_PRODUCT: Final[int] = 100_000
MAX_POWER_EXPONENT: Final[int] = 100
DEFAULT_CACHE_SIZE: Final[int] = 4096

_PARTS: Final[tuple[str, ...]] = ("subject", "body", "html_body")
_UNDEFINED_NAME = re.compile(r"^'([A-Za-z_][A-Za-z0-9_]*)' is undefined$")
_NEWLINES = re.compile(r"[\r\n]+")


class _NoneOutput(Exception):
    """Raised by ``finalize`` when an expression printed ``None``."""


def _finalize(value: Any) -> Any:
    if value is None:
        raise _NoneOutput()
    return value


class TidingsSandbox(ImmutableSandboxedEnvironment):
    """The sandbox used for every template, with bounded ``*`` and ``**``."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, int) and abs(right) > MAX_POWER_EXPONENT:
            raise SecurityError("exponent too large")
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if (
                    isinstance(seq, str | list | tuple)
                    and isinstance(count, int)
                    and len(seq) * count > MAX_SEQUENCE_PRODUCT
                ):
                    raise SecurityError("sequence repetition too large")
        return super().call_binop(context, operator, left, right)


def _make_env(autoescape: bool) -> TidingsSandbox:
    return TidingsSandbox(
        undefined=StrictUndefined,
        autoescape=autoescape,
        finalize=_finalize,
        auto_reload=False,
        cache_size=0,  # we cache compiled templates ourselves, by content hash
    )


TEXT_ENV: Final[TidingsSandbox] = _make_env(autoescape=False)
HTML_ENV: Final[TidingsSandbox] = _make_env(autoescape=True)


def env_for_part(part: str) -> TidingsSandbox:
    """The environment a part is rendered in: HTML autoescaped, the rest not."""
    return HTML_ENV if part == "html_body" else TEXT_ENV


def _filename(part: str) -> str:
    return f"<tidings:{part}>"


@dataclass(frozen=True)
class RenderedMessage:
    """The rendered content. Its repr hides the content (it may hold secrets):
    never persist or log it."""

    subject: str | None = field(repr=False)
    body: str = field(repr=False)
    html_body: str | None = field(default=None, repr=False)


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
            ast = env.parse(source, name=part, filename=_filename(part))
            code = env.compile(ast, name=part, filename=_filename(part))
        except TemplateSyntaxError as exc:
            return CompiledRevision(
                content_hash=rev.content_hash,
                subject=None,
                body=None,
                html_body=None,
                variables=frozenset(),
                syntax_error=(part, exc.lineno, exc.message or "syntax error"),
            )
        variables |= meta.find_undeclared_variables(ast) - set(env.globals)
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


def _lineno(tb: Any, part: str) -> int | None:
    found = None
    for frame in traceback.extract_tb(tb):
        if frame.filename == _filename(part):
            found = frame.lineno
    return found


def _where(rev: TemplateRevision, part: str, lineno: int | None) -> str:
    at = f"{part}, line {lineno}" if lineno is not None else part
    return f"template {rev.name!r} revision {rev.revision} ({at})"


def _render_part(
    rev: TemplateRevision, compiled: CompiledRevision, part: str, ctx: Mapping[str, Any]
) -> str | None:
    template: Template | None = getattr(compiled, part)
    if template is None:
        return None
    failure: RenderError | None = None
    try:
        return template.render(ctx)
    except UndefinedError as exc:
        lineno = _lineno(exc.__traceback__, part)
        match = _UNDEFINED_NAME.match(exc.message or "")
        name = match.group(1) if match else None
        if name is not None and name in compiled.variables:
            failure = RenderError(
                f"{_where(rev, part, lineno)}: undefined variable {name!r}",
                template=rev.name,
                revision=rev.revision,
                part=part,
                variable=name,
                missing=(name,),
                lineno=lineno,
                reason="undefined_variable",
            )
        else:
            failure = RenderError(
                f"{_where(rev, part, lineno)}: undefined attribute or item",
                template=rev.name,
                revision=rev.revision,
                part=part,
                lineno=lineno,
                reason="undefined_attribute",
            )
    except SecurityError as exc:
        lineno = _lineno(exc.__traceback__, part)
        failure = RenderError(
            f"{_where(rev, part, lineno)}: unsafe operation blocked by the sandbox",
            template=rev.name,
            revision=rev.revision,
            part=part,
            lineno=lineno,
            reason="sandbox_violation",
        )
    except _NoneOutput as exc:
        lineno = _lineno(exc.__traceback__, part)
        failure = RenderError(
            f"{_where(rev, part, lineno)}: an expression evaluated to None",
            template=rev.name,
            revision=rev.revision,
            part=part,
            lineno=lineno,
            reason="none_value",
        )
    except Exception as exc:
        lineno = _lineno(exc.__traceback__, part)
        failure = RenderError(
            f"{_where(rev, part, lineno)}: evaluation failed ({type(exc).__name__})",
            template=rev.name,
            revision=rev.revision,
            part=part,
            lineno=lineno,
            reason="evaluation_error",
        )
    # Raised here, outside the except blocks: no __context__ carrying values.
    raise failure


def render(
    revision: TemplateRevision,
    variables: Mapping[str, Any],
    *,
    cache: RenderCache | None = None,
) -> RenderedMessage:
    """Render ``revision`` with ``variables``.

    Every declared required variable must be present (a missing one raises
    :class:`RenderError` listing the missing *names*); any variable the
    template uses but was not given raises too (``StrictUndefined``).
    ``html_body`` is only rendered for e-mail.
    """
    compiled = compile_revision(revision, cache)
    if compiled.syntax_error is not None:
        part, lineno, message = compiled.syntax_error
        raise RenderError(
            f"{_where(revision, part, lineno)}: syntax error: {message}",
            template=revision.name,
            revision=revision.revision,
            part=part,
            lineno=lineno,
            reason="syntax_error",
        )
    missing = tuple(sorted(v for v in set(revision.required_variables) if v not in variables))
    if missing:
        names = ", ".join(repr(m) for m in missing)
        raise RenderError(
            f"template {revision.name!r} revision {revision.revision}: "
            f"missing required variable(s) {names}",
            template=revision.name,
            revision=revision.revision,
            variable=missing[0],
            missing=missing,
            reason="missing_variable",
        )
    ctx = dict(variables)
    subject = _render_part(revision, compiled, "subject", ctx)
    if subject is not None:
        subject = _NEWLINES.sub(" ", subject).strip()
    body = _render_part(revision, compiled, "body", ctx)
    html_body = (
        _render_part(revision, compiled, "html_body", ctx) if revision.channel == "email" else None
    )
    return RenderedMessage(subject=subject, body=body or "", html_body=html_body)


def choose_revision(
    candidates: Iterable[TemplateRevision],
    locale: str | None,
    default_locale: str = DEFAULT_LOCALE,
) -> TemplateRevision:
    """Pick the revision for ``locale`` from ``candidates`` (one template name
    and channel; the caller filters). Order, first hit wins:

    1. exact locale (case/underscore-insensitive: ``de_at`` == ``de-AT``);
    2. the bare language (``de-AT`` -> ``de``);
    3. another region of the same language (``de-AT`` -> ``de-CH``),
       alphabetically first, so the choice is deterministic;
    4. the default locale, then the default locale's language.

    Among several revisions of one locale the highest revision number wins
    (then the content hash, for total determinism). Raises
    :class:`RevisionNotFoundError` when nothing matches.
    """
    by_locale: dict[str, TemplateRevision] = {}
    for rev in candidates:
        key = normalize_locale(rev.locale)
        current = by_locale.get(key)
        if current is None or (rev.revision, rev.content_hash) > (
            current.revision,
            current.content_hash,
        ):
            by_locale[key] = rev
    if not by_locale:
        raise RevisionNotFoundError("no candidate revisions")

    def lookup(wanted: str) -> TemplateRevision | None:
        if not wanted:
            return None
        exact = by_locale.get(wanted)
        if exact is not None:
            return exact
        lang = locale_language(wanted)
        if lang in by_locale:
            return by_locale[lang]
        regional = sorted(k for k in by_locale if locale_language(k) == lang)
        return by_locale[regional[0]] if regional else None

    for wanted in (normalize_locale(locale or ""), normalize_locale(default_locale)):
        found = lookup(wanted)
        if found is not None:
            return found
    available = ", ".join(sorted(by_locale))
    raise RevisionNotFoundError(
        f"no revision for locale {locale!r} or default {default_locale!r} (have: {available})"
    )


__all__ = [
    "HTML_ENV",
    "TEXT_ENV",
    "CacheInfo",
    "CompiledRevision",
    "RenderCache",
    "RenderedMessage",
    "TidingsSandbox",
    "cache_info",
    "choose_revision",
    "clear_cache",
    "compile_revision",
    "env_for_part",
    "render",
]
