"""docs/requirements.md cites code and tests for each seed requirement: a
cited file or test that no longer exists fails here, so the table stays
true (#41)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "requirements.md"
TICKED = re.compile(r"`([^`]+)`")
PATHLIKE = re.compile(r"^[\w./-]+(\.py|\.sql|\.md|/)$")


def rows() -> list[tuple[str, str, str]]:
    found = []
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"R\d{3}\.\d+", cells[0]):
            found.append((cells[0], cells[2], cells[3]))
    return found


def code_path(cited: str) -> Path | None:
    for base in (ROOT / "src" / "tidings", ROOT):
        if (base / cited).exists():
            return base / cited
    return None


def missing_citations() -> list[str]:
    missing = []
    for number, code, tests in rows():
        for cited in TICKED.findall(code):
            if PATHLIKE.match(cited) and code_path(cited) is None:
                missing.append(f"{number}: code {cited}")
        last: Path | None = None
        for cited in TICKED.findall(tests):
            name = cited
            if "::" in cited or PATHLIKE.match(cited):
                path, _, name = cited.partition("::")
                last = ROOT / "tests" / path
                if not last.exists():
                    missing.append(f"{number}: test file {path}")
                    last = None
                    continue
            wanted = bool(name) and re.fullmatch(r"test_\w+", name) is not None
            if wanted and (last is None or f"def {name}(" not in last.read_text()):
                missing.append(f"{number}: test {name}")
    return missing


def test_the_table_has_rows_for_each_seed() -> None:
    numbers = {n.split(".")[0] for n, _, _ in rows()}
    assert numbers == {"R000", "R002", "R003"}


def test_every_cited_file_and_test_exists() -> None:
    assert missing_citations() == []


def test_no_page_describes_the_removed_recheck_option() -> None:
    stale = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "docs").rglob("*.md")
        # benchmarks.md is a dated record of past runs, the recheck among them
        if p.name != "benchmarks.md"
        and ("--recheck-after" in p.read_text() or "recheck.py" in p.read_text())
    ]
    assert stale == []
