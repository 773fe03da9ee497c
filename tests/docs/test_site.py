"""The documentation site builds in strict mode, and its committed
generated page (the state diagram) matches the code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT
from tidings.docs_gen import state_diagram

DIAGRAM = ROOT / "docs" / "concepts" / "state-diagram.md"


def test_the_state_diagram_is_current() -> None:
    assert DIAGRAM.read_text() == state_diagram(), (
        "docs/concepts/state-diagram.md is stale: "
        "python -m tidings.docs_gen state-diagram > docs/concepts/state-diagram.md"
    )


def test_the_site_builds_strictly_with_the_generated_references(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (CI installs it)")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    http = (tmp_path / "reference" / "http" / "index.html").read_text()
    assert "/v1/intents/{intent_id}/cancel" in http
    cli = (tmp_path / "reference" / "cli" / "index.html").read_text()
    assert "tidings worker" in cli and "--lease-seconds" in cli
    settings = (tmp_path / "reference" / "settings" / "index.html").read_text()
    assert "TIDINGS_LEASE_SECONDS" in settings
    assert (tmp_path / "reference" / "openapi.json").is_file()
    python = (tmp_path / "reference" / "python" / "index.html").read_text()
    assert "publish_template" in python
