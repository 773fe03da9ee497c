"""What the soak (`--soak N`, issue #43) adds to a run on a Patroni cluster:
PgBouncer in transaction mode in front of it, following its leader; the
pids whose peak memory the report gives; the big job's size.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from harness.failover.follow import following, leader_target
from harness.pgbouncer import Bouncer, bouncer, through

from . import database
from .processes import Fleet

# Recipients of the big job in an hour's soak; shorter soaks scale it down.
BIG_JOB_PER_HOUR = 100_000
# Each channel's provider switched every ten minutes of an hour's soak, and as
# often in proportion in a shorter one (switching.py).
PROFILE_PHASES = 6
# PgBouncer's idle_transaction_timeout for clients on other hosts.
VANISHED_CLIENT_S = 20


def big_job_size(minutes: float) -> int:
    return max(500, round(BIG_JOB_PER_HOUR * minutes / 60))


@dataclass
class Pooler:
    url: str  # the run's database through PgBouncer
    bouncer: Bouncer
    # Each move to a new leader (wall clock, member); None: no cluster to follow.
    moves: list[dict[str, Any]] | None


def pooled(
    db_url: str,
    server: database.Server,
    stack: ExitStack,
    pool_size: int,
    listen: str = "127.0.0.1",
) -> Pooler:
    """PgBouncer in front of the server, on `listen`; on a Patroni cluster,
    in front of its primary and moved to each new one
    (harness/failover/follow.py). Off loopback its clients are other hosts,
    which can vanish mid-transaction (placement.py): it drops a client idle
    in a transaction for 20 s, as an operator of many hosts would."""
    cluster = server.cluster
    target = leader_target(cluster) if cluster is not None else None
    name = str(conninfo_to_dict(db_url)["dbname"])
    running = stack.enter_context(
        bouncer(
            server.url,
            listen=listen,
            pool_size=pool_size,
            target=target,
            databases=(name,),
            idle_transaction_timeout=0 if listen == "127.0.0.1" else VANISHED_CLIENT_S,
        )
    )
    moves = stack.enter_context(following(cluster, running)) if cluster is not None else None
    return Pooler(through(db_url, running.port, listen), running, moves)


def pids(fleet: Fleet, pooler: Pooler | None, server: database.Server) -> dict[str, int]:
    """Every process of the run by name, for peak memory."""
    found = {w.name: w.pid for w in fleet.live_workers()}
    for proc in (*fleet.apis, fleet.simulator):
        if proc is not None and proc.alive():
            found[proc.name] = proc.pid
    if pooler is not None and pooler.bouncer.proc is not None:
        found["pgbouncer"] = pooler.bouncer.proc.pid
    for member in server.cluster.members if server.cluster is not None else []:
        try:
            found[f"postmaster {member.name}"] = member.postmaster_pid()
        except (OSError, ValueError):
            continue  # that member is down at the moment
    return found


def with_moves(events: list[dict[str, Any]], moves: list[dict[str, Any]] | None) -> None:
    """Each failover or switchover with the seconds until PgBouncer was moved
    to the new primary (`pgbouncer_moved_s`)."""
    if moves is None:
        return
    for event in events:
        after = [m["at"] for m in moves if m["at"] >= event["at"] and m["member"] == event["new"]]
        event["pgbouncer_moved_s"] = round(min(after) - event["at"], 2) if after else None
