"""The code blocks of the documentation, as the example tests run them.

A page's fenced ```python and ```bash blocks are examples, and run. The
README also has indented blocks; those starting with `curl` run too (the
others are install lines and long-running commands that other tests cover).

Markers, as HTML comments (invisible on the site):

- `<!-- docs-test: skip (why) -->` right before a block: not run. Keep these
  few: production settings, commands that never return.
- `<!-- docs-test: library -->` anywhere on a page: the page's examples run
  against a fresh database and the provider simulator alone, no
  `tidings up` (they run their own worker in the process).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\b[^>]*-->\s*$")
LIBRARY = "<!-- docs-test: library -->"
FENCE = re.compile(r"^```(\w+)?[^\n]*$")
RUN_LANGUAGES = {"python": "python", "bash": "bash", "sh": "bash", "shell": "bash"}


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the block's first code line
    language: str  # "python" or "bash"
    code: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page of the site."""
    site = sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)
    return [ROOT / "README.md", *site]


def is_library_page(path: Path) -> bool:
    return LIBRARY in path.read_text("utf-8")


def blocks(path: Path) -> list[Block]:
    """The runnable blocks of one page, in order (skipped ones left out)."""
    lines = path.read_text("utf-8").splitlines()
    page = str(path.relative_to(ROOT))
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        skipped = i > 0 and bool(SKIP.search(_previous_text(lines, i)))
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            language = RUN_LANGUAGES.get(fence.group(1) or "")
            if language and not skipped:
                found.append(Block(page, i + 2, language, "\n".join(lines[i + 1 : end]) + "\n"))
            i = end + 1
            continue
        if path.name == "README.md" and lines[i].startswith("    curl") and not skipped:
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            code = "\n".join(line[4:] for line in lines[i:end]).strip() + "\n"
            found.append(Block(page, i + 1, "bash", code))
            i = end
            continue
        i += 1
    return found


def unnamed_fences(path: Path) -> list[int]:
    """Lines of opening fences without a language: neither run nor marked,
    they would let an example escape the tests unnoticed."""
    unnamed, inside = [], False
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if line.startswith("```"):
            if not inside and not line[3:].strip():
                unnamed.append(number)
            inside = not inside
    return unnamed


def _previous_text(lines: list[str], i: int) -> str:
    j = i - 1
    while j > 0 and not lines[j].strip():
        j -= 1
    return lines[j]
