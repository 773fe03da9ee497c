"""The HTTP API goes only through the facade (`Tidings`), read from the code.

Every module of `api/` may import the client, the domain, templates,
providers and the web framework, but nothing below the client: no store,
runtime, intake, jobs, dispatch or platform module, and no `.db`,
`.clock`, `.vault` or `.runtime` reached through an engine. What the
server itself must wire up is allowlisted below, each with its reason; a
new exception has to be named there, or the facade grows the method.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tidings

API = Path(tidings.__file__).parent / "api"

BELOW_THE_CLIENT = ("store", "runtime", "intake", "jobs", "dispatch", "platform")
ENGINE_INSIDES = frozenset({"db", "clock", "vault", "runtime"})

# (module under api/, what it imports) -> why it may.
ALLOWED_IMPORTS: dict[tuple[str, str], str] = {
    ("app.py", "tidings.dispatch.observe"): (
        "the composition root hands the webhook route the workers' receipt "
        "handling; dispatch stands beside the client, which may not import it"
    ),
    ("app.py", "tidings.runtime"): "the type of what the console and the receipts run on",
    ("rate_limit.py", "tidings.store.api_rate"): (
        "the console's pages spend the same per-tenant rate, on the runtime's "
        "database (console/auth.py): the console stands beside the client"
    ),
    ("rate_limit.py", "tidings.store.database"): "the type of the console's database",
    ("serve.py", "tidings.platform.settings"): (
        "a forked API process reads its settings to build its provider adapters"
    ),
    ("serve.py", "tidings.platform.signal_wait"): (
        "the server's SIGTERM stop exits 0, as the simulator's does: one "
        "process-level helper for both, nothing of the engine"
    ),
    ("settings.py", "tidings.platform.settings"): (
        "ApiSettings is read from the server's settings at start"
    ),
    ("middleware.py", "tidings.platform.logging"): (
        "every layer logs through the one redacting logger"
    ),
    ("problems.py", "tidings.platform.resolver"): (
        "errors mapped to problems (429 DNS_BUSY, 504 DNS_TIMEOUT)"
    ),
}
# (module under api/, attribute) -> why it may reach it.
ALLOWED_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("app.py", "runtime"): (
        "the console and the receipts run on the runtime, as the workers do "
        "(runtime.py), never on the facade"
    ),
    ("app.py", "db"): "the receipts' transaction, on the runtime handed to them",
    ("app.py", "clock"): "the receipts' time, on the runtime handed to them",
}


def modules() -> list[Path]:
    return sorted(API.rglob("*.py"))


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `tidings.store.events.Cursor`, `tidings.store.api_rate`: the
            # name imported, so `from tidings import store` is caught too.
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def is_below_the_client(module: str) -> bool:
    parts = module.split(".")
    return len(parts) >= 2 and parts[0] == "tidings" and parts[1] in BELOW_THE_CLIENT


def violations(name: str, source: str) -> list[str]:
    """What module `name` (its path under api/) does that the facade rule forbids."""
    tree = ast.parse(source)
    modules_here = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    found = []
    for line, module in imported(tree):
        if is_below_the_client(module) and (name, _module_of(module)) not in ALLOWED_IMPORTS:
            found.append(f"api/{name}:{line} imports {module}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr in ENGINE_INSIDES and (name, node.attr) not in ALLOWED_ATTRIBUTES:
            found.append(f"api/{name}:{node.lineno} reaches .{node.attr}")
        if node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner not in ("self", "cls", *modules_here):
                found.append(f"api/{name}:{node.lineno} calls the private .{node.attr}")
    return found


def _module_of(imported_name: str) -> str:
    """`tidings.store.api_keys.Principal` and `tidings.store.api_keys` alike
    are allowed by the entry for the module."""
    for (_, allowed), _why in ALLOWED_IMPORTS.items():
        if imported_name == allowed or imported_name.startswith(allowed + "."):
            return allowed
    return imported_name


def test_the_api_reaches_nothing_below_the_client() -> None:
    found = [v for path in modules() for v in violations(_name(path), path.read_text())]
    assert found == [], "\n".join(found)


def test_every_allowance_is_still_needed() -> None:
    sources = {_name(path): path.read_text() for path in modules()}
    for name, module in ALLOWED_IMPORTS:
        lines = [m for _, m in imported(ast.parse(sources[name]))]
        assert any(m == module or m.startswith(module + ".") for m in lines), (name, module)
    for name, attribute in ALLOWED_ATTRIBUTES:
        attrs = {n.attr for n in ast.walk(ast.parse(sources[name])) if isinstance(n, ast.Attribute)}
        assert attribute in attrs, (name, attribute)


@pytest.mark.parametrize(
    "planted",
    [
        "from tidings.store import ledger\n",
        "import tidings.jobs.uploads\n",
        "from tidings import intake\n",
        "def f(caller):\n    return caller.tidings.db\n",
        "def f(root):\n    return root.clock.now()\n",
        "def f(t):\n    t._ensure_tenant()\n",
    ],
)
def test_a_planted_reach_below_fails(planted: str) -> None:
    assert violations("routes/planted.py", planted) != []


def test_the_allowlist_does_not_spread_to_other_modules() -> None:
    assert violations("routes/planted.py", "from tidings.dispatch.observe import x\n") != []
    assert violations("routes/planted.py", "def f(t):\n    return t.runtime\n") != []


def _name(path: Path) -> str:
    return path.relative_to(API).as_posix()
