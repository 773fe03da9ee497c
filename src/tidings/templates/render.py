"""Render template revisions safely and fast.

Decisions (see also docs):

* Every part is evaluated in the sandbox (:mod:`tidings.templates.sandbox`:
  ``ImmutableSandboxedEnvironment``, ``StrictUndefined``; printing ``None``
  is an error, never the text "None"). The revision is compiled once and
  cached by ``content_hash`` (:mod:`tidings.templates.compiled`).
* ``body`` is plain text for both channels and is rendered **without**
  autoescaping (SMS and text/plain e-mail must not contain ``&amp;``).
  An e-mail revision may carry ``html_body``, an HTML alternative rendered
  **with** autoescaping; use ``|safe`` only on trusted template text.
* Every render has a budget (:mod:`tidings.templates.limits`): loop
  iterations and calls, output bytes per part, seconds. Loops, output and
  ``~`` are counted by code compiled into the template
  (:mod:`tidings.templates.instrument`); filters and methods that could
  build a huge value in one call are checked first
  (:mod:`tidings.templates.guards`); the output is generated in chunks and
  the render stops as soon as it passes the cap. Going past a bound raises
  :class:`RenderError` with ``reason="render_limit"``.
* A rendered subject has CR/LF collapsed to spaces (no header injection).
* :class:`RenderError` names the template, revision, part, line and, for an
  undefined variable, the variable name - never a value or rendered text. It
  is raised outside the original ``except`` block, so the Jinja exception
  (whose message may quote a value used as a key) is not chained onto it.

Which revision a locale gets is :mod:`tidings.templates.locale_fallback`.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from jinja2 import Template, UndefinedError
from jinja2.exceptions import SecurityError

from tidings.templates.compiled import (
    CompiledRevision,
    RenderCache,
    compile_revision,
    source_filename,
)
from tidings.templates.limits import (
    DEFAULT_LIMITS,
    RenderLimitExceeded,
    RenderLimits,
    budget_scope,
)
from tidings.templates.model import RenderError, TemplateRevision
from tidings.templates.sandbox import NoneOutput

RENDER_LIMIT_REASON: Final[str] = "render_limit"

_UNDEFINED_NAME = re.compile(r"^'([A-Za-z_][A-Za-z0-9_]*)' is undefined$")
_NEWLINES = re.compile(r"[\r\n]+")


@dataclass(frozen=True)
class RenderedMessage:
    """The rendered content. Its repr hides the content (it may hold secrets):
    never persist or log it."""

    subject: str | None = field(repr=False)
    body: str = field(repr=False)
    html_body: str | None = field(default=None, repr=False)


def _lineno(tb: Any, part: str) -> int | None:
    found = None
    for frame in traceback.extract_tb(tb):
        if frame.filename == source_filename(part):
            found = frame.lineno
    return found


def _where(rev: TemplateRevision, part: str, lineno: int | None) -> str:
    at = f"{part}, line {lineno}" if lineno is not None else part
    return f"template {rev.name!r} revision {rev.revision} ({at})"


def _generate(template: Template, ctx: Mapping[str, Any], max_bytes: int) -> str:
    """The part's text, generated chunk by chunk and stopped as soon as it
    passes ``max_bytes``: an oversized body is never built whole."""
    chunks: list[str] = []
    size = 0
    stream = cast(Generator[str, None, None], template.generate(ctx))
    try:
        for chunk in stream:
            size += len(chunk) if chunk.isascii() else len(chunk.encode("utf-8", "surrogatepass"))
            if size > max_bytes:
                raise RenderLimitExceeded("output")
            chunks.append(chunk)
    finally:
        stream.close()
    return "".join(chunks)


def _render_part(
    rev: TemplateRevision,
    compiled: CompiledRevision,
    part: str,
    ctx: Mapping[str, Any],
    limits: RenderLimits,
) -> str | None:
    template: Template | None = getattr(compiled, part)
    if template is None:
        return None
    failure: RenderError | None = None
    try:
        return _generate(template, ctx, limits.max_output_bytes)
    except (RenderLimitExceeded, RecursionError, MemoryError) as exc:
        lineno = _lineno(exc.__traceback__, part)
        what = exc.what if isinstance(exc, RenderLimitExceeded) else "recursion"
        failure = RenderError(
            f"{_where(rev, part, lineno)}: render limit exceeded ({what})",
            template=rev.name,
            revision=rev.revision,
            part=part,
            lineno=lineno,
            reason=RENDER_LIMIT_REASON,
        )
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
    except NoneOutput as exc:
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
    limits: RenderLimits = DEFAULT_LIMITS,
) -> RenderedMessage:
    """Render ``revision`` with ``variables``.

    Every declared required variable must be present (a missing one raises
    :class:`RenderError` listing the missing *names*); any variable the
    template uses but was not given raises too (``StrictUndefined``).
    ``html_body`` is only rendered for e-mail. ``limits`` bound the whole
    render (all parts): going past one raises :class:`RenderError` with
    ``reason == "render_limit"``.
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
    with budget_scope(limits):
        subject = _render_part(revision, compiled, "subject", ctx, limits)
        if subject is not None:
            subject = _NEWLINES.sub(" ", subject).strip()
        body = _render_part(revision, compiled, "body", ctx, limits)
        html_body = (
            _render_part(revision, compiled, "html_body", ctx, limits)
            if revision.channel == "email"
            else None
        )
    return RenderedMessage(subject=subject, body=body or "", html_body=html_body)


__all__ = [
    "RENDER_LIMIT_REASON",
    "RenderedMessage",
    "render",
]
