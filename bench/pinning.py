"""CPU pinning for the HTTP measures (issue 42): the load generator on one
core, the server on another, for tidings and its peers alike, so neither
side's figure includes the other's stealing of its core.

Linux affinity is per thread, and a new thread or process inherits the mask
of the thread that created it. So `pinned(CLIENT)` around starting the client
threads pins them, and `pinned(SERVER)` around starting a server process
(subprocess or spawn: both fork from the calling thread) pins the server and
every thread and process it later makes. The calling thread's mask is put
back when the block ends. PostgreSQL is left where the OS puts it.

On a machine with fewer than two usable cores (or without affinity, not
Linux) nothing is pinned, and `note()` says so for the report.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

CLIENT, SERVER = "client", "server"


def cores() -> list[int]:
    """The cores this process may run on, in order; [] where unknown."""
    getter = getattr(os, "sched_getaffinity", None)
    return sorted(getter(0)) if getter else []


def possible() -> bool:
    return len(cores()) >= 2 and hasattr(os, "sched_setaffinity")


def core_of(role: str) -> int | None:
    """The core a role runs on: the first usable for the client, the second for the server."""
    usable = cores()
    if len(usable) < 2:
        return None
    return usable[0] if role == CLIENT else usable[1]


@contextmanager
def pinned(role: str) -> Iterator[int | None]:
    """Pin the calling thread (and what it starts meanwhile) to `role`'s core."""
    core = core_of(role)
    if core is None or not hasattr(os, "sched_setaffinity"):
        yield None
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield core
    finally:
        os.sched_setaffinity(0, before)


def note() -> str:
    if possible():
        client, server = core_of(CLIENT), core_of(SERVER)
        return (
            f"HTTP measures pinned: load generator on core {client}, server on core {server} "
            "(tidings and its peers alike); PostgreSQL unpinned"
        )
    return (
        f"HTTP measures NOT pinned: {len(cores()) or 'an unknown number of'} usable core(s), "
        "fewer than the 2 that pinning the load generator and the server apart needs"
    )
