"""No destination of the run in any process's log (the never-log rule).

Every phone number and e-mail address the run sends to is made by the
harness (workload.py, bigjob.py, hostile.py, oldmonth.py, probes.py): SMS
to +1415 numbers, e-mail to example.org and example.com. After the run
every log the processes wrote is read for them, raw or as an HTTP client
writes them in a URL (`%2B1415...`, `name%40example.org`). The
simulator's own log is left out: it plays the provider, who is given the
destination. A finding names the file and line and never the destination.
"""

from __future__ import annotations

import re
from pathlib import Path

# The run's destinations, in every form a log line could carry them.
DESTINATION = re.compile(
    rb"(?:\+|%2[Bb])1415[\d\- ]{7,}"
    rb"|[A-Za-z0-9._+\-]+(?:@|%40)example\.(?:org|com)\b"
)
PROVIDER_SIDE = frozenset({"simulator.log"})
CHUNK = 1 << 20


def check(log_dir: Path | None) -> list[str]:
    """One finding per log file that holds a destination: where it first is."""
    if log_dir is None or not log_dir.is_dir():
        return []
    found = []
    for path in sorted(log_dir.rglob("*")):
        if not path.is_file() or path.name in PROVIDER_SIDE:
            continue
        first = _first_destination(path)
        if first is not None:
            line, kind = first
            found.append(f"{path.relative_to(log_dir)}:{line} holds a run's {kind} in the clear")
    return found


def _first_destination(path: Path) -> tuple[int, str] | None:
    """(line number, "phone number" or "e-mail address") of the first one."""
    line = 1
    tail = b""  # a destination cut in two by a chunk's end is read whole
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            text = tail + chunk
            match = DESTINATION.search(text)
            if match is not None:
                kind = "e-mail address" if b"example" in match.group(0) else "phone number"
                return line + text.count(b"\n", 0, match.start()), kind
            keep = min(len(text), 128)
            line += text.count(b"\n", 0, len(text) - keep)
            tail = text[len(text) - keep :]
    return None
