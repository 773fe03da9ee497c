"""PgBouncer that follows a Patroni cluster's leader.

PgBouncer has no `target_session_attrs`: it connects to one server and
cannot tell a primary from a standby. In production it points at HAProxy,
at a virtual IP that Patroni's callbacks move, or its file is rewritten by
an `on_role_change` callback; here a thread plays that callback, asking
Patroni's REST API who leads and re-pointing PgBouncer at that member
(docs/scaling.md, "PgBouncer in front of a cluster that fails over").

Until it moves, PgBouncer's new server connections reach the old primary:
refused while it is down, read-only (SQLSTATE 25006) once it rejoins as a
standby. tidings reads both as "no primary yet" and waits
(store/primary.py), which is what this arrangement tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harness.failover.cluster import PatroniCluster
from harness.pgbouncer import Bouncer

# How often Patroni is asked; its own loop runs every second.
POLL_S = 0.25


@contextmanager
def following(cluster: PatroniCluster, bouncer: Bouncer) -> Iterator[list[dict[str, Any]]]:
    """Keep `bouncer` on the leader while the block runs; yields the moves
    made (wall-clock time, member), so a report can time them."""
    moves: list[dict[str, Any]] = []
    stop = threading.Event()

    def follow() -> None:
        while not stop.wait(POLL_S):
            leader = _leader(cluster)
            if leader is None:
                continue
            member = next(m for m in cluster.members if m.name == leader)
            if bouncer.target != ("127.0.0.1", member.pg_port):
                bouncer.repoint("127.0.0.1", member.pg_port)
                moves.append({"at": time.time(), "member": leader})

    thread = threading.Thread(target=follow, name="pgbouncer-follows-leader", daemon=True)
    thread.start()
    try:
        yield moves
    finally:
        stop.set()
        thread.join(5)


def _leader(cluster: PatroniCluster) -> str | None:
    """The member Patroni names leader and runs, if any."""
    for name, member in cluster.state().items():
        if member.get("role") == "leader" and member.get("state") == "running":
            return name
    return None


def leader_target(cluster: PatroniCluster) -> tuple[str, int]:
    """Where PgBouncer points first: the primary, once there is one."""
    primary = cluster.wait_primary(60.0)
    return ("127.0.0.1", primary.pg_port)
