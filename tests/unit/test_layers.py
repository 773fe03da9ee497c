"""The layering of docs/architecture.md, enforced: no module imports upward.

Each module belongs to the layer of its package (or of its top-level
module: `tidings.client_jobs` is in the client's layer), so a new module
in an existing package is checked without anyone listing it. A module
may import its own layer and any layer below it; every import counts,
including those inside functions and under `TYPE_CHECKING`, because a
lazy or type-only import of the client is still a dependency on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tidings

SOURCE = Path(tidings.__file__).parent

# Lowest first. A layer is one part, or parts side by side that may not
# import each other (the client and the workers both stand on the runtime;
# neither needs the other). A prefix names a package, a module, or the
# top-level modules that start with it and "_" (client -> client_jobs).
LAYERS: tuple[tuple[tuple[str, tuple[str, ...]], ...], ...] = (
    (("domain", ("domain", "policies")),),
    (("templates", ("templates",)),),
    (
        (
            "platform",
            (
                "config",
                "private_files",
                "vault",
                "signing",
                "outbound",
                "resolver",
                "signal_wait",
                "observability.logging",
            ),
        ),
    ),
    (("providers", ("providers",)),),
    (("store", ("store",)),),
    (("jobs and intake", ("jobs", "intake")),),
    (("runtime", ("runtime",)),),
    (("client", ("client", "__init__")), ("workers", ("dispatch", "observability", "console"))),
    (("api", ("api",)),),
    (("applications", ("cli", "keys_cli", "devstack", "demo", "docs_gen", "replay")),),
)
PART = {
    prefix: (rank, name)
    for rank, parts in enumerate(LAYERS)
    for name, prefixes in parts
    for prefix in prefixes
}


def part_of(module: str) -> tuple[int, str]:
    """The rank and part of `module` ("dispatch.steps", "client_jobs"); the
    longest matching prefix wins, so observability.logging is not observability."""
    found = [
        prefix
        for prefix in PART
        if module == prefix or module.startswith((f"{prefix}.", f"{prefix}_"))
    ]
    if not found:
        raise LookupError(f"tidings.{module} has no layer: add it to LAYERS in {__file__}")
    return PART[max(found, key=len)]


def may_import(importer: str, target: str) -> bool:
    (rank, part), (target_rank, target_part) = part_of(importer), part_of(target)
    return target_rank < rank or (target_rank == rank and target_part == part)


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imported(tree: ast.AST, module: str) -> set[str]:
    """Every tidings module `tree` imports, relative to the package."""
    found: set[str] = set()
    package = module.split(".")[:-1] if "." in module else []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(["tidings", *base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            found.add(name)
            # `from tidings import x` may name a module: count the module.
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return {
        name.removeprefix("tidings.")
        for name in found
        if name.startswith("tidings.") and _exists(name.removeprefix("tidings."))
    }


def _exists(module: str) -> bool:
    path = SOURCE.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def upward_imports(source: str, module: str) -> list[str]:
    return sorted(
        f"{module} ({part_of(module)[1]}) imports {target} ({part_of(target)[1]})"
        for target in imported(ast.parse(source), module)
        if not may_import(module, target)
    )


def sources() -> list[Path]:
    return sorted(SOURCE.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    for path in sources():
        part_of(module_name(path))


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = [
        problem
        for path in sources()
        for problem in upward_imports(path.read_text(), module_name(path))
    ]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("dispatch.runner", "from tidings.client import Tidings"),
        ("dispatch.steps", "if TYPE_CHECKING:\n    from tidings.client import Tidings"),
        ("observability.alerts", "def f():\n    from tidings.api.app import create_app"),
        ("store.ledger", "from tidings.dispatch import record"),
        ("domain.policy", "import tidings.store.database"),
        ("client_jobs", "from tidings.dispatch.runner import Worker"),
        ("runtime", "from tidings.client import Tidings"),
    ],
)
def test_an_upward_import_is_caught(module: str, line: str) -> None:
    assert upward_imports(line, module)


def test_imports_downward_and_within_a_layer_pass() -> None:
    assert not upward_imports("from tidings.runtime import Runtime", "dispatch.runner")
    assert not upward_imports("from tidings.observability import alerts", "console.router")
    assert not upward_imports("from tidings.observability.logging import log", "store.wait")
    assert not upward_imports("from tidings.client import Tidings", "api.app")
