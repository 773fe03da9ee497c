"""Every example in the documentation runs, as a reader would paste it.

The site's pages and the README (see tests/docs/blocks.py for which
blocks and the markers) run against a real stack: `tidings up` on a fresh
database with the printed development key in `$KEY`, so `localhost:8000`
and the simulator are really there. Pages marked as library pages run
against a fresh database and a simulator alone. Blocks of one page run in
order in one working directory; shell variables a block sets (upper-case
names) carry over to the page's next shell blocks, and every `curl` fails
the example on an HTTP error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.processes import simulator

from tests.conftest import clone_database, drop_database
from tests.docs.blocks import ROOT, Block, blocks, is_library_page, pages, unnamed_fences
from tests.e2e.test_up import start as start_up
from tidings.cli.devstack import free_port

EXAMPLE_TIMEOUT = 120
PAGES = [p for p in pages() if blocks(p)]
# What the README's upload example reads, and the id its job example names.
AUDIENCE = '{"ref": "r1", "phone": "+14155550123"}\n{"ref": "r2", "phone": "+14155550124"}\n'
UPLOAD_PLACEHOLDER = "<id from the upload>"

PROLOGUE = """set -euo pipefail
curl() { command curl --fail-with-body --silent --show-error "$@"; }
if [ -f "$DOCS_STATE" ]; then source "$DOCS_STATE"; fi
__before=" $(compgen -v | tr '\\n' ' ') "
"""
# Upper-case variables the block set, for the page's next block.
EPILOGUE = """
for __v in $(compgen -v); do
  case "$__v" in [A-Z]*) [[ "$__before" == *" $__v "* ]] || declare -p "$__v";; esac
done >> "$DOCS_STATE"
"""


@pytest.fixture(scope="module")
def stack(pg_server_url: str, template_db: str, tmp_path_factory: Any) -> Iterator[dict[str, str]]:
    """`tidings up` as the quick start runs it; the environment examples see."""
    name, url = clone_database(pg_server_url, template_db)
    home = tmp_path_factory.mktemp("up-home")
    api, sim = free_port(), free_port()
    proc, key = start_up(url, home, api, sim)
    try:
        yield {
            "DATABASE_URL": url,
            "TIDINGS_HOME": str(home),
            "KEY": key,
            "API_PORT": str(api),
            "SIMULATOR_PORT": str(sim),
        }
    finally:
        proc.send_signal(2)
        proc.wait(timeout=60)
        drop_database(pg_server_url, name)


@pytest.fixture(scope="module")
def library(
    pg_server_url: str, template_db: str, tmp_path_factory: Any
) -> Iterator[dict[str, str]]:
    """A fresh database and a simulator, no worker or API."""
    name, url = clone_database(pg_server_url, template_db)
    home = tmp_path_factory.mktemp("library-home")
    with simulator() as sim_url:
        yield {
            "DATABASE_URL": url,
            "TIDINGS_HOME": str(home),
            "SIMULATOR_PORT": sim_url.rsplit(":", 1)[1],
        }
    drop_database(pg_server_url, name)


def localized(code: str, env: dict[str, str]) -> str:
    """The example as it runs here: the stack's ports for the default ones."""
    for host in ("localhost", "127.0.0.1"):
        if "API_PORT" in env:
            code = code.replace(f"{host}:8000", f"127.0.0.1:{env['API_PORT']}")
        code = code.replace(f"{host}:8099", f"127.0.0.1:{env['SIMULATOR_PORT']}")
    return code


def run_block(block: Block, env: dict[str, str], workdir: Path) -> str:
    code = localized(block.code, env)
    full_env = {
        **env,
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "DOCS_STATE": str(workdir / ".docs-state"),
        "HOME": str(workdir),
        "COLUMNS": "200",
    }
    if block.language == "python":
        command = [sys.executable, "-c", code]
    else:
        command = ["bash", "-c", PROLOGUE + code + EPILOGUE]
    done = subprocess.run(
        command,
        env=full_env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT,
    )
    assert done.returncode == 0, (
        f"the example at {block.where} failed ({done.returncode}):\n{code}\n"
        f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    return done.stdout


def readme_setup(env: dict[str, str], workdir: Path, example: Block) -> Block:
    """The README's upload example reads audience.ndjson, and its job names
    the upload by a placeholder: make the file, and fill in a real upload."""
    (workdir / "audience.ndjson").write_text(AUDIENCE)
    if UPLOAD_PLACEHOLDER not in example.code:
        return example
    upload = httpx.post(
        f"http://127.0.0.1:{env['API_PORT']}/v1/audiences",
        content=AUDIENCE,
        headers={"Authorization": f"Bearer {env['KEY']}", "content-type": "application/x-ndjson"},
    )
    upload.raise_for_status()
    code = example.code.replace(UPLOAD_PLACEHOLDER, upload.json()["id"])
    return Block(example.page, example.line, example.language, code)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_example_on_the_page_runs(
    page: Path, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    assert shutil.which("jq"), "the shell examples use jq"
    outputs = []
    for block in blocks(page):
        # The README's library example stands alone: no worker may race it.
        alone = is_library_page(page) or (page.name == "README.md" and block.language == "python")
        env = dict(request.getfixturevalue("library" if alone else "stack"))
        if page.name == "README.md":
            block = readme_setup(env, tmp_path, block)
        outputs.append(run_block(block, env, tmp_path))
        if alone and page.name == "README.md":  # run again, as a reader trying it twice would
            outputs.append(run_block(block, env, tmp_path))
    if page.name == "README.md":
        # What the README says its library example prints; the second run
        # replays the same offer (its key) and finds it canceled.
        assert "pending default-1 1" in outputs[0]
        assert "pending -> canceled cancel library" in outputs[0]
        assert outputs[1].startswith("canceled default-1 1"), outputs[1]
        outputs.pop(1)
        assert '"state":"pending"' in outputs[1]  # the intent the curl example made


def test_every_fence_names_its_language() -> None:
    """A block is run (python, bash), shown (json, text, mermaid) or marked
    skipped: never left ambiguous."""
    unnamed = {str(p.relative_to(ROOT)): unnamed_fences(p) for p in pages()}
    assert not {page: lines for page, lines in unnamed.items() if lines}


def test_examples_are_found() -> None:
    """A fence the collector misread would silently run nothing."""
    found = {str(p.relative_to(ROOT)): len(blocks(p)) for p in PAGES}
    assert found["README.md"] >= 3, found
    assert found["docs/tutorials/quickstart.md"] >= 3, found
    assert os.path.exists(ROOT / "mkdocs.yml")
