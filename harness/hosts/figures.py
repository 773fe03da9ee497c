"""The figures of a many-hosts run (docs/scaling.md "Many hosts"): intents
per second per worker host in each phase, per API host, and the database
server's CPU for them, read from /proc (harness/hosts/cluster.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import psycopg

from .cluster import Cluster
from .traffic import ApiClients, Stream, burst

if TYPE_CHECKING:
    from .run import HostsConfig

APIS = ("api-1", "api-2")


def bursts(
    cluster: Cluster, clients: ApiClients, config: HostsConfig, say: Callable[[str], None]
) -> dict[str, Any]:
    """Each API host's intents/s alone, then both at once, and the
    database's CPU for them (the workers send them meanwhile)."""
    rates: dict[str, float] = {}
    created = 0
    cpu = cluster.database_cpu_seconds()
    for name in APIS:
        n = burst(clients, name, config.burst_callers, config.api_burst_s, "alone")
        rates[name] = round(n / config.api_burst_s, 1)
        created += n
        say(f"{name} alone: {rates[name]} intents/s")
    with ThreadPoolExecutor(len(APIS)) as pool:
        both = list(pool.map(
            lambda name: burst(clients, name, config.burst_callers, config.api_burst_s, "both"),
            APIS,
        ))  # fmt: skip
    created += sum(both)
    rates["both"] = round(sum(both) / config.api_burst_s, 1)
    say(f"both at once: {rates['both']} intents/s")
    cpu = cluster.database_cpu_seconds() - cpu
    return {
        "api_host_intents_per_s": rates,
        "burst_created": created,
        "burst_database_cores_per_1000_creates_per_s": round(1000 * cpu / created, 2),
    }


def sent_by_host(
    db_url: str, hosts: dict[int, str], clock: dict[str, float]
) -> dict[str, Counter[str]]:
    """Accepted attempts per worker host, overall and in each phase while
    the job kept every host busy: before the cut (three hosts) and after the
    pause (the two left and the new one), each from its first acceptance of
    a job intent to its last (not the job's preparation before, nor the
    stream alone after)."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT t.actor, extract(epoch FROM t.at)::float8, i.job_id IS NOT NULL"
            " FROM transitions t JOIN intents i ON i.tenant_id = t.tenant_id"
            " AND i.id = t.intent_id WHERE t.to_state = 'accepted'"
        ).fetchall()
    bounds = {
        "before_cut": (clock["job"], clock["cut"]),
        "after_pause": (clock["pause_end"] + 2, clock["job_done"]),
    }
    for phase, (low, high) in bounds.items():
        job_times = sorted(at for _, at, of_job in rows if of_job and low <= at < high)
        # To the 99th percentile: the last few are the cut host's unknown
        # outcomes, reconciled (or resent) long after the rest went out.
        clock[f"{phase}_from"] = job_times[0] if job_times else low
        clock[f"{phase}_to"] = job_times[int(0.99 * (len(job_times) - 1))] if job_times else low
    phases: dict[str, Counter[str]] = {name: Counter() for name in ("all", *bounds, "per_5s")}
    for actor, at, _ in rows:
        # Sends per 5 s of the run, every host together: the cut and the pause show.
        phases["per_5s"][f"{int((at - clock['begin']) // 5 * 5):04d}"] += 1
        parts = str(actor).split(":")  # worker:<hostname>:<pid>:<n>
        if parts[0] != "worker":
            continue  # a receipt that arrived before the answer: no host sent it
        host = hosts.get(int(parts[2]), str(actor))
        phases["all"][host] += 1
        for phase in bounds:
            if clock[f"{phase}_from"] <= at <= clock[f"{phase}_to"]:
                phases[phase][host] += 1
    return phases


def figures(
    clock: dict[str, float], cpu: dict[str, float], config: HostsConfig, stream: Stream,
    by_host: dict[str, Counter[str]],
) -> dict[str, Any]:  # fmt: skip
    before = clock["before_cut_to"] - clock["before_cut_from"]
    after = clock["after_pause_to"] - clock["after_pause_from"]
    cpu_job = cpu["job"]
    sent_in_job_window = config.recipients + sum(stream.created_by.values())
    job_window = clock["job_done"] - clock["job"]
    # Before the cut the job kept three hosts busy: the steady state.
    sent_before_cut = sum(by_host["before_cut"].values())
    return {
        "worker_host_intents_per_s_before_cut": {
            h: round(n / before, 1) for h, n in sorted(by_host["before_cut"].items())
        }
        if before > 0
        else {},
        "worker_host_intents_per_s_after_pause": {
            h: round(n / after, 1) for h, n in sorted(by_host["after_pause"].items())
        }
        if after > 0
        else {},
        "api_host_stream": {
            h: {"created": n, "ms_per_create": round(1000 * stream.seconds_by[h] / n, 1)}
            for h, n in sorted(stream.created_by.items())
        },
        "database_cpu_seconds": round(cpu_job, 1),
        "intents_in_window": sent_in_job_window,
        "window_seconds": round(job_window, 1),
        # Cores the server keeps busy at 1,000 intents/s: CPU-seconds per 1,000 intents.
        "database_cores_per_1000_intents_per_s": round(1000 * cpu_job / sent_in_job_window, 2),
        "database_cores_before_cut": round(cpu["before_cut"] / (clock["cut"] - clock["job"]), 2),
        "database_cores_per_1000_intents_per_s_before_cut": round(
            1000 * cpu["before_cut"] / max(1, sent_before_cut), 2
        ),
        "sends_per_5s": dict(sorted(by_host["per_5s"].items())),
    }
