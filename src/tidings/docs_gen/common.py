"""What the page generators share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).parents[1]  # src/tidings


def cell(text: object) -> str:
    """Text safe inside one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def subclasses(cls: Any) -> list[Any]:
    """`cls` and every class below it, parents first."""
    found: list[Any] = [cls]
    for sub in cls.__subclasses__():
        found += subclasses(sub)
    return found
