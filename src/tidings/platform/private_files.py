"""Files that hold secrets or could: readable by their owner only (0600).

The trial secret key under TIDINGS_HOME and the demo's log (a log can hold
a development key or a minted link if something goes wrong) are created
0600 whatever the umask, and an existing file with wider permissions, from
an older version or a copy, is narrowed when it is next used.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TextIO

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def make_private_dir(path: Path) -> None:
    """Create `path` (0700) if it is missing; an existing directory is left as it is."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)


def narrow(path: Path) -> None:
    """Take group and other permissions off an existing file."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, mode & PRIVATE_FILE)


def open_private_append(path: Path) -> TextIO:
    """Open `path` for appending text, line-buffered, as a 0600 file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)  # an existing file keeps its mode otherwise
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)
