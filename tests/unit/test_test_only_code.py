"""No test-only code in src/: every function, class and method defined there
is used by src/ itself, or is part of the public surface listed here.

Code that only tests call is code the product does not run: it drifts from
what the product does, and a test of it proves nothing about the product.
A helper a test needs lives in tests/.

A name counts as used when it appears in src/ anywhere but its own
definition: as a name, an attribute, a string (what is loaded by name, such
as a provider's module), or a word in a template the console renders.
Matching is by name, so a use of one `send` keeps every `send`: the check
finds what nothing could call, not every dead line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tidings
from tidings.client import Tidings

SRC = Path(tidings.__file__).parent
# Files other than Python that name Python attributes: the console's templates.
TEMPLATE_SUFFIXES = {".html", ".txt", ".j2"}
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A string that may name Python: "send", "tidings.providers.twilio",
# "module:function"; a sentence is not a use of its words.
NAME_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*")

# The public surface nothing in src/ calls, each with who calls it.
PUBLIC = {
    # Documented for running the simulator in process (simulator/__init__.py):
    # the benchmarks and the dispatch tests wire a worker to it.
    "providers/simulator/in_process.py:InProcessSimulatorAdapter",
    "providers/simulator/in_process.py:InProcessSimulatorAdapter.due_webhooks",
    # The receiver's half of the webhook signature, for applications that
    # receive tidings' event and alert webhooks (observability/alerts/webhook.py).
    "platform/signing.py:verify_signature",
    # A worker's steps, each run once: the runner loops them, and tests drive
    # them one at a time with a manual clock (docs/architecture.md, workers).
    "dispatch/steps.py:WorkerSteps.dispatch_once",
    "dispatch/steps.py:WorkerSteps.push_events_once",
    # Which provider the reliability run plays each day: .ci/run and
    # docs/testing.md call it from the shell.
    "providers/catalog.py:played_profiles",
    # Observers of state their class keeps to itself (the accounts a
    # reload retired; the clock's offset from the database and the error of
    # its anchor), read by tests and kept beside that state so they cannot
    # drift from it.
    "providers/accounts.py:ProviderAccounts.retired",
    "store/database_clock.py:DatabaseClock.offset_seconds",
    "store/database_clock.py:DatabaseClock.error_seconds",
}
# Methods a library calls by its own protocol, never by name in src/.
CALLED_BY_A_LIBRARY = {
    "auth_flow",  # httpx.Auth
    "visit_Compare",  # jinja2 NodeVisitor, one visit_<Node> per node type
    "visit_Concat",
    "visit_For",
    "visit_Output",
    "visit_Pair",
}


@dataclass(frozen=True)
class Definition:
    module: str  # "domain/schedules.py"
    name: str  # "poll_times", or "Class.method"
    node: ast.AST

    @property
    def key(self) -> str:
        return f"{self.module}:{self.name}"

    @property
    def word(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def definitions(root: Path) -> Iterator[Definition]:
    """Module-level functions and classes, and the methods of those classes."""
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        for node in ast.parse(path.read_text("utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield Definition(module, node.name, node)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                        yield Definition(module, f"{node.name}.{member.name}", member)


def registered(node: ast.AST) -> bool:
    """A function a framework calls once its decorator registers it (a route,
    a command, a validator): `@router.get(...)`, `@app.command()`."""
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
        isinstance(decorator, ast.Call) for decorator in node.decorator_list
    )


def words_used(root: Path) -> dict[str, int]:
    """How often each name is used under `root`; a definition's own name is
    not a use of it."""
    counts: dict[str, int] = {}
    for path in sorted(root.rglob("*")):
        if path.suffix in TEMPLATE_SUFFIXES:
            for word in WORD.findall(path.read_text("utf-8")):
                counts[word] = counts.get(word, 0) + 1
        elif path.suffix == ".py":
            for word in _python_words(ast.parse(path.read_text("utf-8"))):
                counts[word] = counts.get(word, 0) + 1
    return counts


def _python_words(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.alias) and node.asname:
            # `from m import integer as _int`: the uses are of `_int`.
            yield node.name.rsplit(".", 1)[-1]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and NAME_LIKE.fullmatch(node.value)
        ):
            yield from WORD.findall(node.value)


def unused(root: Path, public: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """What is defined under `root` and used nowhere there, by module and name."""
    used = words_used(root)
    return [
        d.key
        for d in definitions(root)
        if d.word not in used
        and d.key not in public
        and not (d.word.startswith("__") and d.word.endswith("__"))
        and d.word not in CALLED_BY_A_LIBRARY
        and not registered(d.node)
    ]


def public_surface() -> set[str]:
    """PUBLIC, the names `tidings` exports, and the facade's public methods."""
    exported = set(tidings.__all__)
    facade = {
        name
        for cls in Tidings.__mro__
        if cls.__module__.startswith("tidings.")
        for name in vars(cls)
        if not name.startswith("_")
    }
    found = set(PUBLIC)
    for d in definitions(SRC):
        owner, _, method = d.name.rpartition(".")
        facade_method = owner in {c.__name__ for c in Tidings.__mro__} and method in facade
        if d.name in exported or facade_method:
            found.add(d.key)
    return found


def test_nothing_in_src_is_there_for_the_tests_alone() -> None:
    found = unused(SRC, public_surface())
    assert not found, "used only by tests (or by nothing): move to tests/ or delete\n" + "\n".join(
        found
    )


def test_the_public_list_names_what_exists() -> None:
    keys = {d.key for d in definitions(SRC)}
    assert sorted(PUBLIC - keys) == []


def test_a_planted_test_only_function_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "lib.py").write_text(
        "def used():\n    return 1\n\n\n"
        "def only_for_tests():\n    return used()\n\n\n"
        "class Thing:\n    def method(self):\n        return 1\n\n"
        "    def test_hook(self):\n        return 2\n\n\n"
        "@router.get('/x')\ndef handler():\n    return Thing().method()\n\n\n"
        "def loaded_by_name():\n    return 3\n\n\n"
        "def renamed():\n    return 4\n"
    )
    (tmp_path / "pkg" / "registry.py").write_text(
        "from pkg.lib import renamed as _renamed\n"
        'HANDLERS = ["pkg.lib:loaded_by_name", _renamed]\n'
        'NOTE = "only_for_tests in a sentence is not a use"\n'
    )
    found = unused(tmp_path)
    assert found == ["pkg/lib.py:only_for_tests", "pkg/lib.py:Thing.test_hook"]
