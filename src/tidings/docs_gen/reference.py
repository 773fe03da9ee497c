"""Reference pages from the code itself: the CLI (from the typer app),
settings (from the pydantic-settings model) and the stable codes."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tidings.docs_gen.common import PACKAGE, cell, subclasses

UPPER_CODE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$|^[A-Z]{5,}$")


# --- the CLI --------------------------------------------------------------------


def cli_reference() -> str:
    """Every `tidings` command with its usage and options, from the typer app."""
    import typer

    from tidings.cli.main import app

    # typer vendors its own click: duck-type its commands, groups and contexts.
    root = typer.main.get_command(app)
    out = [
        "# CLI reference\n",
        "Generated from the `tidings` command's own help at build time.\n",
        "Run `tidings COMMAND --help` for the same text in a terminal.\n",
    ]
    for path, command, ctx in _commands(root, root.context_class(root, info_name="tidings")):
        if hasattr(command, "list_commands"):
            continue
        out.append(f"## `{' '.join(path)}`\n")
        out.append(f"{inspect.cleandoc(command.help or '')}\n")
        out.append(f"```text\n{command.get_usage(ctx)}\n```\n")
        rows = [p.get_help_record(ctx) for p in command.params]
        options = [r for r in rows if r is not None]
        if options:
            out.append("| argument or option | meaning |\n|---|---|")
            out += [f"| `{cell(name)}` | {cell(help_)} |" for name, help_ in options]
            out.append("")
    return "\n".join(out)


def _commands(
    command: Any, ctx: Any, path: tuple[str, ...] = ("tidings",)
) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    yield path, command, ctx
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            context = sub.context_class(sub, info_name=name, parent=ctx)
            yield from _commands(sub, context, (*path, name))


# --- settings ---------------------------------------------------------------------


def settings_reference() -> str:
    """Every field of `tidings.platform.settings.Settings` with its default and comment,
    then every other `TIDINGS_*` variable the code reads, and where."""
    from tidings.platform.settings import Settings

    comments = _field_comments(PACKAGE / "platform" / "settings.py")
    out = [
        "# Settings\n",
        "Generated from `src/tidings/platform/settings.py` (a pydantic-settings model) at",
        "build time. Each setting is an environment variable; a comment in",
        "the model that covers several fields is shown on the first. The",
        "README's configuration table says more about each.\n",
        "| variable | type | default | notes |\n|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        env = " or ".join(f"`{c}`" for c in getattr(alias, "choices", ()) if isinstance(c, str))
        env = env or f"`TIDINGS_{name.upper()}`"
        kind = getattr(field.annotation, "__name__", None) or str(field.annotation)
        kind = cell(re.sub(r"\b[a-z_]+\.", "", kind))  # pydantic.types.SecretStr: SecretStr
        default = "unset" if field.default is None else f"`{field.default}`"
        out.append(f"| {env} | {kind} | {default} | {cell(comments.get(name, ''))} |")
    out += [
        "",
        "## Variables read outside the model\n",
        "Provider adapters read `TIDINGS_<PROVIDER>_*` (see",
        "[the provider guide](../guides/providers.md)); alert objectives are",
        "`TIDINGS_ALERT_*` ([operations](../operations.md));",
        "`TIDINGS_SMS_PROVIDER` and `TIDINGS_EMAIL_PROVIDER` name the adapter",
        "for each channel (`tidings.providers.routing`). Every other",
        "`TIDINGS_*` name in the code, and the module that reads it:\n",
        "| variable | read in |\n|---|---|",
    ]
    from tidings.domain.errors import TidingsError

    known = {f"TIDINGS_{n.upper()}" for n in Settings.model_fields} | {TidingsError.code}
    for env, modules in sorted(_env_names().items()):
        if env not in known:
            out.append(f"| `{env}` | {', '.join(f'`{m}`' for m in sorted(modules))} |")
    return "\n".join(out) + "\n"


def _field_comments(path: Path) -> dict[str, str]:
    """The `#` comment lines right above each annotated field of a class."""
    lines = path.read_text("utf-8").splitlines()
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            row = node.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#"):
                above.insert(0, lines[row].strip().lstrip("#").strip())
                row -= 1
            found[node.target.id] = " ".join(above)
    return found


def _env_names() -> dict[str, set[str]]:
    names: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for env in re.findall(r"^TIDINGS_[A-Z0-9_]*[A-Z0-9]$", node.value):
                    names.setdefault(env, set()).add(module)
    return names


# --- stable codes -------------------------------------------------------------------


def codes_reference() -> str:
    """The stable codes: API problems, policy decisions, provider outcomes and
    the engine's own failure codes, each found where the code defines it."""
    from tidings.api import problems
    from tidings.domain import errors
    from tidings.domain.decision_codes import RETRYABLE_CODES, DecisionCode
    from tidings.providers.outcomes import RejectCode

    out = [
        "# Stable codes\n",
        "Generated from the code at build time. A code, once published, keeps",
        "its meaning; branch on codes, never on `detail` or `title` text.\n",
        "## HTTP problem codes\n",
        "Every error answer is `application/problem+json` with a `code`",
        "(`src/tidings/api/problems.py`).\n",
        "| code | status | raised by |\n|---|---|---|",
    ]
    rows: dict[str, tuple[str, str]] = {}
    for cls in subclasses(problems.ApiError):
        rows.setdefault(cls.code, (str(cls.status), f"`{cls.__name__}`"))
    statuses = {
        "InvalidInput": "422",
        "NotFound": "404",
        "Conflict": "409",
        "StaleTransition": "409",
        "RequestLimited": "429",
    }
    for cls in subclasses(errors.TidingsError):
        status = next((statuses[b.__name__] for b in cls.__mro__ if b.__name__ in statuses), "400")
        rows.setdefault(cls.code, (status, f"`{cls.__name__}`"))
    for code, status, module in _literal_codes(PACKAGE / "api"):
        rows.setdefault(code, (status, f"`{module}`"))
    out += [f"| `{c}` | {s} | {by} |" for c, (s, by) in sorted(rows.items())]
    retryable = RETRYABLE_CODES
    out += [
        "",
        "## Policy decision codes\n",
        "Every policy decision carries one (`src/tidings/domain/decision_codes.py`;",
        "[policy](../policy.md)). Retryable ones reschedule; the rest suppress.\n",
        "| code | retryable |\n|---|---|",
        *(f"| `{c}` | {'yes' if c in retryable else 'no'} |" for c in sorted(DecisionCode)),
        "",
        "## Provider outcome codes\n",
        "What an adapter reports for a rejection or failure",
        "(`RejectCode` in `src/tidings/providers/base.py`).\n",
        *(f"- `{c.value}`" for c in RejectCode),
        "",
        "## Engine failure codes\n",
        "Codes the engine itself records on an attempt or intent (dispatch,",
        "templates, token minting), found as literals in the code.\n",
        "| code | module |\n|---|---|",
    ]
    seen = set(rows) | {c.value for c in DecisionCode} | {c.value for c in RejectCode}
    engine: dict[str, set[str]] = {}
    for folder in ("dispatch", "templates"):
        for code, _, module in _literal_codes(PACKAGE / folder):
            if code not in seen:
                engine.setdefault(code, set()).add(module)
    out += [
        f"| `{c}` | {', '.join(f'`{m}`' for m in sorted(ms))} |" for c, ms in sorted(engine.items())
    ]
    return "\n".join(out) + "\n"


def _literal_codes(folder: Path) -> Iterator[tuple[str, str, str]]:
    """Upper-case string literals used as codes: `code=...` arguments, the
    code argument of problem()/PrepareError()/TooManyRequests(), and
    module constants named like their value or like `*CODE*`."""
    for path in sorted(folder.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            for value, status in _code_values(node):
                if UPPER_CODE.match(value):
                    yield value, status, module


def _code_values(node: ast.AST) -> Iterator[tuple[str, str]]:
    """(code, HTTP status if the call says it) pairs found at `node`."""

    def text(n: ast.AST | None) -> str | None:
        return n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else None

    if isinstance(node, ast.Call):
        name = getattr(node.func, "id", getattr(node.func, "attr", ""))
        status = {"TooManyRequests": "429", "Unauthenticated": "401"}.get(name, "")
        first = node.args[0] if node.args else None
        if name == "problem" and isinstance(first, ast.Constant):
            status = str(first.value)
        for kw in node.keywords:
            if kw.arg == "code" and (value := text(kw.value)):
                yield value, status
        position = {"problem": 1, "TooManyRequests": 0, "PrepareError": 0}.get(name, -1)
        argument = node.args[position] if 0 <= position < len(node.args) else None
        if value := text(argument):
            yield value, status
    elif isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = text(node.value)
        for target in targets:
            if (
                isinstance(target, ast.Name)
                and value
                and (target.id == value or "CODE" in target.id)
            ):
                yield value, ""
