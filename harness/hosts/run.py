"""The many-hosts run (issue #26, docs/scaling.md "Many hosts"), shared by
the bounded test (tests/long/test_multi_host.py) and the long run
(`python -m harness.reliability --hosts`).

Two API hosts and three worker hosts. In order, while a bulk job drains
and a stream of single intents arrives through both API hosts:

1. a kill switch turned on through API host 1 holds the `held` tenant's
   intents, created through API host 2, on every worker host; then off;
2. the `limited` tenant's intents go out at most at its policy's rate in
   total, not at that rate per worker host;
3. worker host 2 is cut off (its interface down), then its processes are
   killed;
4. the provider answers 429 with a long Retry-After; a fresh worker host
   is added during the pause and must keep it too, having seen no 429;
5. everything drains; the rows and the simulator's ledger are read.

The run returns what it saw; the caller judges (`HostsResult`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from harness import http
from harness.netns import topology
from harness.processes import ledger

from . import figures as hosts_figures
from .cluster import Cluster
from .traffic import (
    ApiClients,
    Stream,
    console_session_crosses_hosts,
    prepare,
    upload_job,
)

SENT = {"accepted", "timeout_after_accept"}
TERMINAL = {"delivered", "canceled", "suppressed", "no_permitted_channel", "failed", "expired"}
APIS = {"api-1": 11, "api-2": 12}
WORKERS = {"worker-1": 21, "worker-2": 22, "worker-3": 23}
CUT, ADDED = "worker-2", ("worker-4", 24)


@dataclass
class HostsConfig:
    recipients: int = 5_000
    stream_per_s: float = 10.0
    held: int = 10
    limited: int = 40
    rate_limit: int = 8
    rate_window_s: int = 4
    # Long enough that a worker host started after the first 429 is ready
    # well inside the pause, on a machine busy with the other long tests.
    retry_after_s: int = 25
    cut_at_share: float = 0.3  # of the job sent when worker host 2 is cut off
    # > 0: at the end, each API host alone, then both, take single intents
    # from `burst_callers` concurrent callers for this long (the long run).
    api_burst_s: float = 0.0
    burst_callers: int = 8
    final_timeout_s: float = 240.0
    worker_args: tuple[str, ...] = (
        "--batch-size", "100", "--sms-concurrency", "8", "--lease-seconds", "10",
    )  # fmt: skip
    profile: str = "twilio"
    pg_settings: dict[str, str] = field(default_factory=dict)
    progress: Callable[[str], None] = field(default=lambda _: None, repr=False)


@dataclass
class HostsResult:
    config: HostsConfig
    states: Counter[str]
    sends_per_key: Counter[str]
    sends_per_intent: Counter[str]
    delivered: set[str]
    stream_ids: list[str]
    job: dict[str, Any]
    held_sent_while_on: int
    held_sent_after: int
    limited_times: list[float]
    pause_start: float
    calls_during_pause: int
    added_ready_at: float
    session_crossed: bool
    sent_by_host: dict[str, Counter[str]]  # phase -> host -> intents sent
    seconds: dict[str, float]
    figures: dict[str, Any]
    stream_errors: list[str]
    lease_recoveries: int
    cut_host_connections_left: int


def run(root: Path, config: HostsConfig) -> HostsResult:
    say = config.progress
    with topology() as topo:
        cluster = Cluster(topo, root, config.profile, config.worker_args, config.pg_settings)
        try:
            return _run(cluster, config, say)
        finally:
            cluster.stop()


def _run(cluster: Cluster, config: HostsConfig, say: Callable[[str], None]) -> HostsResult:
    clock: dict[str, float] = {"begin": time.time()}
    db_url = cluster.start_database()
    rule = {"scope": "tenant", "limit": config.rate_limit, "per_seconds": config.rate_window_s}
    keys = prepare(db_url, rule)
    for name, octet in {**APIS, **WORKERS}.items():  # the namespaces, before anyone listens
        cluster.topo.add_host(name, octet)
    sim = cluster.start_simulator(webhook_host="api-1")
    http.request("PUT", f"{sim}/_config", json={"latency_ms": 20}, timeout=10).raise_for_status()
    for name, octet in APIS.items():
        cluster.start_api(name, octet)
    for name, octet in WORKERS.items():
        cluster.start_worker(name, octet)
    clients = ApiClients({name: cluster.api_url(name) for name in APIS}, keys)
    say(f"up: {len(APIS)} API hosts, {len(WORKERS)} worker hosts on {cluster.topo.subnet}")
    clock["up"] = time.time()
    stream = Stream(clients, config.stream_per_s)
    try:
        session_crossed = console_session_crosses_hosts(clients, keys["default"])
        held_while_on, held_ids, limited_ids = _held_and_limited(clients, sim, config)
        stream.start()
        cpu_start = cluster.database_cpu_seconds()
        job_id = upload_job(clients, "api-1", "api-2", config.recipients)
        clock["job"] = time.time()
        say(f"job of {config.recipients} created; stream at {config.stream_per_s}/s")
        _release(clients, held_ids)
        _wait(lambda: _sent_count(db_url) >= config.cut_at_share * config.recipients,
              config.final_timeout_s, "the job's first share sent")  # fmt: skip
        clock["cut"] = time.time()
        cpu_before_cut = cluster.database_cpu_seconds() - cpu_start
        cluster.topo.hosts[CUT].cut_off()
        say(f"{CUT} cut off at {_sent_count(db_url)} sent")
        time.sleep(3)  # cut off but running: its leases run out, nobody is told
        cluster.kill_host(CUT)
        pause_start, added_ready_at = _pause_with_a_new_host(cluster, sim, config, say)
        clock["pause_end"] = pause_start + config.retry_after_s
        _wait(lambda: _job_done(clients, job_id), config.final_timeout_s, "the job sent")
        clock["job_done"] = time.time()
        cpu_job = cluster.database_cpu_seconds() - cpu_start
        stream.stop()
        clock["stream_end"] = time.time()
        _wait(lambda: set(_states(db_url)) <= TERMINAL, config.final_timeout_s,
              "every intent final")  # fmt: skip
        clock["final"] = time.time()
        bursts = (
            hosts_figures.bursts(cluster, clients, config, say) if config.api_burst_s > 0 else {}
        )
        _wait(lambda: set(_states(db_url)) <= TERMINAL, config.final_timeout_s,
              "every intent final after the bursts")  # fmt: skip
        entries = ledger(sim)
        job = clients("api-1").get(f"/v1/jobs/{job_id}").json()
    finally:
        stream.stop()  # before its clients close, also when the run failed
        clients.close()
    say("all final; reading the ledger")
    sends = Counter(e["idempotency_key"] for e in entries if e["outcome"] in SENT)
    per_intent = Counter(_intent_of(k) for k in sends.elements())
    sent_times = _first_send_times(entries)
    sent_by_host = hosts_figures.sent_by_host(db_url, cluster.host_of_pid(), clock)
    cpu = {"job": cpu_job, "before_cut": cpu_before_cut}
    figures = {**hosts_figures.figures(clock, cpu, config, stream, sent_by_host), **bursts}
    return HostsResult(
        config=config,
        states=_states(db_url),
        sends_per_key=sends,
        sends_per_intent=per_intent,
        delivered=_delivered(db_url),
        stream_ids=stream.ids,
        job=job,
        held_sent_while_on=held_while_on,
        held_sent_after=sum(1 for i in held_ids if i in per_intent),
        limited_times=sorted(sent_times[i] for i in limited_ids if i in sent_times),
        pause_start=pause_start,
        calls_during_pause=sum(
            1 for e in entries if pause_start + 2 < _at(e) < pause_start + config.retry_after_s - 1
        ),
        added_ready_at=added_ready_at,
        session_crossed=session_crossed,
        sent_by_host=sent_by_host,
        seconds={k: round(v - clock["begin"], 1) for k, v in clock.items()},
        figures=figures,
        stream_errors=stream.errors,
        lease_recoveries=_scalar(
            db_url, "SELECT count(*) FROM transitions WHERE decision_code = 'LEASE_EXPIRED'"
        ),
        cut_host_connections_left=_scalar(
            db_url,
            "SELECT count(*) FROM pg_stat_activity WHERE client_addr = %s::inet",
            (cluster.topo.hosts[CUT].address,),
        ),
    )


def _held_and_limited(
    clients: ApiClients, sim: str, config: HostsConfig
) -> tuple[int, list[str], list[str]]:
    """The kill switch on through API host 1, the held tenant's intents
    created through API host 2, and the limited tenant's through both."""
    on = clients("api-1", "held").put(
        "/v1/controls/kill-switch", json={"enabled": True, "scope": {}}
    )
    assert on.status_code == 200, on.text
    held = [clients.create("api-2", "held", f"held-{n}") for n in range(config.held)]
    hosts = sorted(clients.urls)
    limited = [
        clients.create(hosts[n % 2], "limited", f"limited-{n}") for n in range(config.limited)
    ]
    # The limited tenant needs several windows; meanwhile every worker host
    # is free to claim the held intents, and must not.
    _wait(lambda: len(_sent(ledger(sim)) & set(limited)) == len(limited),
          config.final_timeout_s, "the limited tenant's intents sent")  # fmt: skip
    return len(_sent(ledger(sim)) & set(held)), held, limited


def _release(clients: ApiClients, held: list[str]) -> None:
    off = clients("api-2", "held").put(
        "/v1/controls/kill-switch", json={"enabled": False, "scope": {}}
    )
    assert off.status_code == 200, off.text


def _pause_with_a_new_host(
    cluster: Cluster, sim: str, config: HostsConfig, say: Callable[[str], None]
) -> tuple[float, float]:
    """429s until the first one is answered, then none; a new worker host
    joins while the account is paused. When the pause began, when the new
    host was ready (both on the simulator's clock, this machine's)."""
    seen = len(ledger(sim))
    change = {"rate_429": 1.0, "retry_after_seconds": config.retry_after_s}
    http.request("PUT", f"{sim}/_config", json=change, timeout=10).raise_for_status()
    first = _wait(lambda: _first_limited(ledger(sim)[seen:]), 60, "the first 429")
    http.request("PUT", f"{sim}/_config", json={"rate_429": 0.0}, timeout=10).raise_for_status()
    say(f"provider paused for {config.retry_after_s} s; adding {ADDED[0]}")
    added = cluster.start_worker(*ADDED)
    ready_at = time.time()
    say(
        f"{ADDED[0]} ready {ready_at - first:.1f} s into the pause "
        f"(started at {added.started_at - first:.1f} s)"
    )
    return first, ready_at


def _wait(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)  # real processes are working; poll their results
    raise AssertionError(f"timed out waiting for {what}")


def _states(db_url: str) -> Counter[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT state, count(*) FROM intents GROUP BY state").fetchall()
    return Counter({r[0]: r[1] for r in rows})


def _scalar(db_url: str, sql: str, params: tuple[Any, ...] = ()) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


def _delivered(db_url: str) -> set[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT id FROM intents WHERE state = 'delivered'").fetchall()
    return {str(r[0]) for r in rows}


def _sent_count(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM intents WHERE state IN ('accepted', 'delivered')"
        ).fetchone()
    return int(row[0]) if row else 0


def _job_done(clients: ApiClients, job_id: str) -> bool:
    status = clients("api-2").get(f"/v1/jobs/{job_id}").json()
    return status["status"] in ("complete", "complete_with_failures")


def _intent_of(attempt_key: str) -> str:
    return attempt_key.rsplit(":", 2)[-2]  # <prefix>:<intent id>:<n>


def _at(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(entry["received_at"]).timestamp()


def _sent(entries: list[dict[str, Any]]) -> set[str]:
    return {_intent_of(e["idempotency_key"]) for e in entries if e["outcome"] in SENT}


def _first_send_times(entries: list[dict[str, Any]]) -> dict[str, float]:
    times: dict[str, float] = {}
    for e in entries:
        if e["outcome"] in SENT:
            times.setdefault(_intent_of(e["idempotency_key"]), _at(e))
    return times


def _first_limited(entries: list[dict[str, Any]]) -> float | None:
    limited = [_at(e) for e in entries if e["outcome"] == "rate_limited"]
    return min(limited) if limited else None
