"""The layering of docs/architecture.md, enforced: no module imports upward.

A module's layer is its folder (`tidings.client.jobs` is in `client/`), so
a new module is checked without anyone listing it, and a new folder or a
new top-level module fails until someone says where it stands. A module
may import its own folder and any layer below it; every import counts,
including those inside functions and under `TYPE_CHECKING`, because a
lazy or type-only import of the client is still a dependency on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tidings
from tidings.docs_gen.layers import LAYERS

SOURCE = Path(tidings.__file__).parent

# The layers are defined once, beside the generator that draws them in
# docs/architecture.md.
PART = {
    folder: (rank, name)
    for rank, parts in enumerate(LAYERS)
    for name, folders in parts
    for folder in folders
}
TOP_LEVEL_MODULES = {"__init__", "runtime"}


def part_of(module: str) -> tuple[int, str]:
    """The rank and part of `module` ("dispatch.steps", "client.jobs"): its folder's."""
    folder = module.split(".")[0]
    if folder not in PART:
        raise LookupError(
            f"tidings.{module} has no layer: add it to LAYERS in src/tidings/docs_gen/layers.py"
        )
    return PART[folder]


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
            # `from tidings.console import csrf` names a module: it imports
            # the module, and the package only when a name is not a module.
            names = [f"{name}.{alias.name}" for alias in node.names]
            modules = [n for n in names if _exists(n.removeprefix("tidings."))]
            found.update(modules)
            if len(modules) < len(names):
                found.add(name)
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
        ("client.jobs", "from tidings.dispatch.runner import Worker"),
        ("jobs.freeze", "from tidings.intake.create import create_or_replay"),
        ("runtime", "from tidings.client import Tidings"),
    ],
)
def test_an_upward_import_is_caught(module: str, line: str) -> None:
    assert upward_imports(line, module)


def test_imports_downward_and_within_a_layer_pass() -> None:
    assert not upward_imports("from tidings.runtime import Runtime", "dispatch.runner")
    assert not upward_imports("from tidings.observability import alerts", "console.router")
    assert not upward_imports("from tidings.platform.logging import log", "store.wait")
    assert not upward_imports("from tidings.client import Tidings", "api.app")


def test_the_only_top_level_modules_are_the_public_names_and_the_runtime() -> None:
    top = {p.stem for p in SOURCE.glob("*.py")}
    assert top == TOP_LEVEL_MODULES, "put a new module in the folder of its layer"


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sources():
        module = module_name(path)
        graph[module] = {
            target for target in imported(ast.parse(path.read_text()), module) if target != module
        }
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of two or more
    modules (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_circles_are_found() -> None:
    graph = {"a.x": {"b.y"}, "b.y": {"a.x"}, "c": {"a.x"}}
    assert circles(graph) == [["a.x", "b.y"]]


def test_no_import_circle() -> None:
    assert circles(import_graph()) == []
