"""The README's library example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"


def test_the_readme_library_example_runs(db_url: str, tmp_path: Path) -> None:
    [example] = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    env = {"DATABASE_URL": db_url, "TIDINGS_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", example], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "pending default-1 1" in done.stdout
    assert "pending -> canceled cancel library" in done.stdout
