"""No module in src/ over 400 lines: past that, split it by concept.

A module that long is doing more than one job, and each job is easier to
read, test and review alone (STYLE.md: modules of 100 to 300 lines).
"""

from __future__ import annotations

from pathlib import Path

import tidings

SRC = Path(tidings.__file__).parent
MOST_LINES = 400


def lines(path: Path) -> int:
    return len(path.read_text("utf-8").splitlines())


def oversized(root: Path, most: int = MOST_LINES) -> dict[str, int]:
    """Each module under `root` longer than `most` lines, by its path from `root`."""
    return {
        path.relative_to(root).as_posix(): count
        for path in sorted(root.rglob("*.py"))
        if (count := lines(path)) > most
    }


def test_no_module_is_over_the_limit() -> None:
    over = oversized(SRC)
    assert not over, "split by concept: " + ", ".join(f"{p} ({n} lines)" for p, n in over.items())


def test_a_module_over_the_limit_is_named(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MOST_LINES + 1))
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MOST_LINES)
    assert oversized(tmp_path) == {"pkg/long.py": MOST_LINES + 1}
