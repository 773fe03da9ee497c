"""docs/architecture.md agrees with the code.

Its diagram and layer table are generated from LAYERS, the same table
tests/unit/test_layers.py holds every import to, so the doc cannot draw a
layering the imports break. Its prose names folders and modules; each must
exist, so a move or a rename cannot leave the doc pointing at old paths.
"""

from __future__ import annotations

import re
from pathlib import Path

import tidings
from tidings.docs_gen.layers import BEGIN, END, LAYERS, layers_section

SRC = Path(tidings.__file__).parent
REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
# A path in backticks: `dispatch/steps.py`, `platform/`, `store/sql/queries/*.sql`.
PATH = re.compile(r"`([\w./*-]+(?:\.py|\.sql|/))`")


def generated_part(doc: str) -> str:
    start, end = doc.index(BEGIN), doc.index(END)
    return doc[start : end + len(END)] + "\n"


def missing_paths(doc: str, package: Path = SRC, repo: Path = REPO) -> list[str]:
    """Paths the doc names that exist neither in the package (by path, or by
    name anywhere in it, as the prose names a module inside its folder's
    paragraph) nor from the repository's root."""
    missing = []
    for path in sorted(set(PATH.findall(doc))):
        pattern = path.rstrip("/")
        in_package = any(package.glob(pattern)) or (
            "/" not in pattern and any(package.rglob(pattern))
        )
        if not (in_package or any(repo.glob(pattern))):
            missing.append(path)
    return missing


def test_the_layers_in_the_doc_are_generated_from_the_code() -> None:
    assert generated_part(DOC.read_text("utf-8")) == layers_section(), (
        "regenerate: python -m tidings.docs_gen layers, between the markers of docs/architecture.md"
    )


def test_every_path_the_doc_names_exists() -> None:
    assert missing_paths(DOC.read_text("utf-8")) == []


def test_every_part_of_a_layer_has_its_paragraph() -> None:
    doc = DOC.read_text("utf-8")
    unexplained = [name for layer in LAYERS for name, _ in layer if f"\n**{name}** (" not in doc]
    assert unexplained == []


def test_a_stale_path_is_found(tmp_path: Path) -> None:
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "jobs.py").write_text("")
    doc = "In `client/`, `jobs.py` and `client/jobs.py`; the old `client_jobs.py`, `cli/`."
    assert missing_paths(doc, tmp_path, tmp_path) == ["cli/", "client_jobs.py"]


def test_a_hand_edited_layer_table_differs() -> None:
    doc = DOC.read_text("utf-8").replace("| jobs | `jobs/`", "| jobs | `jobs/`, `intake/`")
    assert generated_part(doc) != layers_section()
