"""One reliability run, start to finish.

1. A database of its own (on the given server, or on a private embedded
   one), a simulator, the API and N workers as real processes.
2. Chaos for the configured time: load (floods, an HTTP trickle with
   replayed creates, bulk jobs, near deadlines), cancellations racing the
   workers, and the scheduled faults (`faults.py`).
3. Recovery: the provider calms down and the backlog must drain within a
   bounded time; then each worker is probed alone (`probes.py`).
4. Settling, then the invariants (`invariants.py`) over the rows and the
   provider's ledger. The report says what was injected, what was
   processed, and every violation.
"""

from __future__ import annotations

import random
import re
import secrets
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from harness.failover.watch import resumed, watching
from harness.wires import wired_in
from tidings import Tidings

from . import (
    catchup,
    database,
    faults,
    invariants,
    logscan,
    memory,
    placement,
    probes,
    snapshot,
    soak,
    switching,
)
from .bigjob import BigJob
from .oldmonth import OldMonth
from .processes import Fleet
from .webhooks import WebhookRelay
from .workload import Workload

REPORTS = Path(__file__).parent / "reports"


@dataclass
class RunConfig:
    minutes: float
    seed: int = 11
    workers: int = 2
    lease_seconds: float = 8.0
    concurrency: int = 4
    # The provider the simulator plays: `ideal` can look messages up by our
    # key, which no real provider can, so guarantees are checked under the
    # real ones (providers/simulator/profiles.py).
    profile: str = "twilio"
    # Each channel's provider's real adapter over the simulator's wire of
    # that provider (harness/wires.py); None: wherever it has one.
    wire: bool | None = None
    server_url: str | None = None  # None: a private embedded PostgreSQL
    flood_size: int = 400
    job_size: int = 60
    http_creates_per_s: float = 4.0
    cancels_per_s: float = 3.0
    # After the last fault, the backlog must be drained within this long.
    drain_timeout_s: float = 120.0
    settle_timeout_s: float = 90.0
    report_dir: Path = REPORTS
    log_dir: Path | None = None
    keep_database: bool = False
    pauses: bool = False  # the opt-in worker_pause fault
    # API and workers reach the database through PgBouncer in transaction
    # pooling mode (docs/scaling.md); the checks read it directly.
    pgbouncer: bool = False
    pgbouncer_pool: int = 4  # PgBouncer's server connections per database
    # A three-member Patroni cluster instead (harness/failover/), with its
    # failovers and switchovers among the faults; `periods` replaces the
    # fault kinds of faults.PERIODS (a run of fewer kinds).
    patroni: bool = False
    periods: dict[str, float] | None = None
    # Issue #43: a job of this many recipients (0: none), made early in the
    # run, beside urgent single intents over HTTP at this rate; the drain
    # waits up to `big_job_timeout_s` for it to finish first.
    big_job: int = 0
    urgent_per_s: float = 1.0
    big_job_timeout_s: float = 600.0
    # Issue #43: the run in this many equal spans, each channel moved to the
    # next wired provider between two (switching.py); 0 or 1: no switch.
    profile_phases: int = 0
    # Issue #43's soak: the faults of faults.SOAK_PERIODS as well.
    soak: bool = False
    # Issue #43: the APIs and workers on hosts in network namespaces, with
    # host cuts among the faults (placement.py); on a Patroni cluster only.
    hosts: bool = False
    progress: Callable[[str], None] = field(default=lambda _: None, repr=False)


@dataclass
class RunReport:
    config: dict[str, Any]
    started_at: str
    seconds: dict[str, float]
    server: dict[str, Any]
    faults: dict[str, Any]
    workload: dict[str, Any]
    processed: dict[str, Any]
    probes: list[dict[str, Any]]
    invariants: dict[str, dict[str, Any]]
    violations: int
    evidence: dict[str, dict[str, Any]]  # the history of a few offending intents
    logs: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run(config: RunConfig) -> RunReport:
    if config.hosts and not config.patroni:
        raise ValueError("hosts in network namespaces need the run's own (Patroni) cluster")
    with ExitStack() as stack:
        placed = stack.enter_context(placement.placed()) if config.hosts else None
        bridge = placed.bridge if placed is not None else None
        server = stack.enter_context(database.server(config.server_url, config.patroni, bridge))
        return _run(config, server, stack, placed)


def _run(
    config: RunConfig,
    server: database.Server,
    stack: ExitStack,
    placed: placement.Placement | None,
) -> RunReport:
    say = config.progress
    rng = random.Random(config.seed)
    tag = f"{time.strftime('%Y%m%dT%H%M%S')}-{config.seed}"
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    clock = time.monotonic()
    db_url = database.create_database(server.url)
    if not config.keep_database:
        stack.callback(database.drop_database, server.url, db_url)
    home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tidings-rel-")))
    log_dir = config.log_dir or config.report_dir / f"logs-{tag}"
    secret = secrets.token_hex(24)
    wired = bool(wired_in(config.profile)) if config.wire is None else config.wire
    wired = wired or config.profile_phases > 1  # switching is through the wires
    listen = placed.address if placed is not None else "127.0.0.1"
    pooler = None
    if config.pgbouncer:
        pooler = soak.pooled(db_url, server, stack, config.pgbouncer_pool, listen)
    fleet = Fleet(
        db_url,
        home,
        secret,
        log_dir,
        workers_wanted=config.workers,
        lease_seconds=config.lease_seconds,
        concurrency=config.concurrency,
        simulator_seed=config.seed,
        profile=config.profile,
        pooled_url=pooler.url if pooler is not None else None,
        wire=wired,
        switching=config.profile_phases > 1,
        placement=placed,
    )
    relay = WebhookRelay(fleet.api_urls, _route(config.profile, wired)).start()
    stack.callback(relay.close)
    stack.callback(fleet.stop)
    fleet.start(relay.url)
    waiting = stack.enter_context(watching(fleet.metrics_url)) if config.patroni else None
    peaks = stack.enter_context(memory.watching(lambda: soak.pids(fleet, pooler, server)))
    faults.configure(fleet.sim_url, {**faults.BASELINE, "seed": config.seed})
    t = Tidings(db_url, secret_key=secret)
    stack.callback(t.close)
    work = Workload(t, fleet.api_url, random.Random(rng.random()), tag, fleet.api_urls)
    work.prepare()
    say(f"database {db_url.split('dbname=')[-1]} on the {server.kind} server; logs in {log_dir}")

    chaos_s = config.minutes * 60
    periods = config.periods
    if config.patroni:
        periods = {**(faults.PERIODS if periods is None else periods), **faults.FAILOVER_PERIODS}
    if config.soak:
        periods = {**(faults.PERIODS if periods is None else periods), **faults.SOAK_PERIODS}
    if placed is not None:
        host_cuts = {placement.KIND: placement.PERIOD_S}
        periods = {**(faults.PERIODS if periods is None else periods), **host_cuts}
    schedule = faults.Schedule.draw(chaos_s, random.Random(rng.random()), config.pauses, periods)
    injector = faults.Injector(
        fleet, server, relay, work, random.Random(rng.random()), config.flood_size, config.job_size
    )
    old_month = OldMonth(db_url, secret, fleet.env()) if config.soak else None
    if old_month is not None:
        injector.more_actions["purge_old_month"] = old_month.purge
    if placed is not None:
        cuts = placement.HostCut(placed, injector, random.Random(rng.random()))
        injector.more_actions[placement.KIND] = cuts.cut
    if config.profile_phases > 1:
        switcher = switching.Switcher(fleet, injector, switching.rotation(config.profile))
        injector.more_actions[switching.KIND] = switcher.switch
        switching.schedule_switches(schedule, chaos_s, config.profile_phases)
    stop = threading.Event()
    stack.callback(stop.set)  # however the run ends, load and faults stop first
    errors: Counter[str] = Counter()  # load that failed during faults (expected)
    threads = [
        threading.Thread(target=injector.run, args=(schedule, stop), name="injector", daemon=True),
        _every(
            1 / config.http_creates_per_s, stop, "trickle", _trickle(work, rng.random()), errors
        ),
        _every(1 / config.cancels_per_s, stop, "cancels", _cancels(work, rng.random()), errors),
    ]
    backlog: list[tuple[float, int]] = []  # (seconds into the run, intents due now)
    threads.append(_every(5.0, stop, "backlog", _sample(db_url, injector, backlog), errors))
    big = BigJob(work, config.big_job)
    if config.big_job:
        threads.append(threading.Thread(target=big.create, name="big-job", daemon=True))
        threads.append(_every(1 / config.urgent_per_s, stop, "urgent", big.urgent_one, errors))
    for thread in threads:
        thread.start()
    threads[0].join()  # the schedule ends with the final restart
    stop.set()
    for thread in threads[1:]:
        thread.join(30)
    seconds = {"setup": 0.0, "chaos": round(injector.elapsed(), 1)}
    seconds["setup"] = round(time.monotonic() - clock - seconds["chaos"], 1)
    say(f"chaos over after {seconds['chaos']} s: {injector.summary()['by_kind']}")

    faults.configure(fleet.sim_url, faults.CALM)
    disarmed = injector.disarm()
    if disarmed:
        say(f"killed armed workers before the probes: {', '.join(disarmed)}")
    extra: dict[str, list[str]] = {"processes_recover": list(injector.problems)}
    if config.big_job:
        finished = big.wait_finished(db_url, config.big_job_timeout_s)
        seconds["big_job_after_chaos"] = finished or config.big_job_timeout_s
        say(f"big job: {big.unfinished(db_url)} left to send after {finished} s more")
    drained = catchup.wait_drained(db_url, config.drain_timeout_s)
    seconds["drain"] = round(drained if drained is not None else config.drain_timeout_s, 1)
    if drained is None:
        extra["processes_recover"].append(
            f"backlog not drained {config.drain_timeout_s:.0f} s after the last fault: "
            f"{catchup.backlog(db_url)}"
        )
    say(f"backlog drained in {seconds['drain']} s; probing each worker alone")
    probed = probes.probe_all(fleet, t, tag)
    extra["processes_recover"] += [f for p in probed for f in p.failures]
    injector.supervise()
    for name, proc in (*((a.name, a) for a in fleet.apis), ("simulator", fleet.simulator)):
        if proc is None or not proc.alive():
            extra["processes_recover"].append(f"{name} is not running at the end")
    settled = catchup.wait_settled(db_url, config.settle_timeout_s)
    seconds["settle"] = round(settled if settled is not None else config.settle_timeout_s, 1)

    evidence = snapshot.take(
        db_url, fleet.sim_url, fleet.api_url, work.api_key, work.jobs, fleet.metrics_url
    )
    evidence.extra = extra
    evidence.extra["idempotent_create"] = list(work.mismatches)
    kept = {str(i["id"]) for i in evidence.intents}
    evidence.extra["acknowledged_creates_kept"] = [
        f"intent {i} was acknowledged and is missing" for i in work.acknowledged - kept
    ]
    # Issues #39 and #43: the hostile policy and every replayed case of
    # tests/security refused or quarantined, nothing sent under them.
    if work.hostile is not None:
        evidence.extra["hostile_tenant_isolated"] = work.hostile.check()
    if old_month is not None:
        evidence.extra["old_month_purged"] = old_month.check()
    evidence.extra["no_destination_in_logs"] = logscan.check(log_dir)
    non_duplicate = {k: n for k, n in injector.replay_effects.items() if k != "duplicate"}
    evidence.extra["replayed_webhooks_change_nothing"] = (
        [f"replayed webhooks had effects {non_duplicate}"] if non_duplicate else []
    )
    results = invariants.check_all(evidence)
    failovers = resumed(db_url, server.cluster.events) if server.cluster else []
    soak.with_moves(failovers, pooler.moves if pooler is not None else None)
    peaks.sample(soak.pids(fleet, pooler, server))
    suspects = _suspects(results)
    seconds["total"] = round(time.monotonic() - clock, 1)
    return RunReport(
        config={
            k: str(v) if isinstance(v, Path) else v
            for k, v in asdict(config).items()
            if k != "progress"
        },
        started_at=started_at,
        seconds=seconds,
        server={
            "kind": server.kind,
            "restart": server.restart_skip_reason or "possible",
            "failovers": failovers,
            "pgbouncer_moves": len(pooler.moves or []) if pooler is not None else None,
            "hosts": placed.summary() if placed is not None else None,
        },
        faults=injector.summary(),
        workload={
            "created": dict(work.created),
            "outcomes": dict(sorted(work.outcomes.items())),
            "load_errors": dict(errors),
            "webhooks_forwarded": {str(k): v for k, v in relay.forwarded.items()},
            "webhooks_replayed": {str(k): v for k, v in relay.replayed.items()},
        },
        processed={
            **_processed(evidence),
            "claims_per_s": round(
                sum(1 for t in evidence.transitions if t["event"] == "claim")
                / max(1.0, seconds["chaos"] + seconds["drain"]),
                1,
            ),
            "backlog_peak": max((n for _, n in backlog), default=0),
            "backlog_every_5s": backlog,
            "waiting_for_primary": waiting.summary() if waiting else {},
            "big_job": big.report(evidence) if config.big_job else {},
            "peak_memory": peaks.summary(),
        },
        probes=[asdict(p) for p in probed],
        invariants={
            name: {"violations": len(found), "examples": found[:10]}
            for name, found in results.items()
        },
        violations=sum(len(found) for found in results.values()),
        evidence={str(i): _history(evidence, i) for i in suspects},
        logs=str(log_dir),
    )


def _processed(s: invariants.Snapshot) -> dict[str, Any]:
    return {
        "intents": len(s.intents),
        "intents_by_state": dict(Counter(i["state"] for i in s.intents).most_common()),
        "attempts": len(s.attempts),
        "provider_requests": dict(Counter(e["outcome"] for e in s.ledger_after).most_common()),
        "provider_requests_by_profile": dict(
            Counter(e.get("profile") for e in s.ledger_after).most_common()
        ),
        "observations_by_source": dict(Counter(o["source"] for o in s.observations)),
        "receipts_by_state": dict(Counter(r["state"] for r in s.receipts)),
        "lease_recoveries": sum(
            1 for t in s.transitions if t["decision_code"] in ("LEASE_EXPIRED", "CALL_NOT_STARTED")
        ),
        "cancels_committed": sum(1 for t in s.transitions if t["event"] == "cancel"),
        "deadline_expiries": sum(1 for t in s.transitions if t["event"] == "deadline_passed"),
        "jobs": len(s.job_counts),
    }


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SUSPECTS = 8


def _suspects(results: dict[str, list[str]]) -> list[uuid.UUID]:
    found: list[uuid.UUID] = []
    for violations in results.values():
        for text in violations:
            match = UUID.search(text)
            if match and uuid.UUID(match.group()) not in found and len(found) < SUSPECTS:
                found.append(uuid.UUID(match.group()))
    return found


def _history(s: invariants.Snapshot, intent_id: uuid.UUID) -> dict[str, Any]:
    """An offending intent's audit and attempts, so a report explains itself."""

    def mine(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in rows if r.get("intent_id") == intent_id or r.get("id") == intent_id]

    attempts = mine(s.attempts)
    keys = {a["attempt_key"] for a in attempts}  # read once: the ledger has every send of the run
    return {
        "intent": mine(s.intents),
        "transitions": sorted(mine(s.transitions), key=lambda t: t["version"]),
        "attempts": attempts,
        "provider_requests": [e for e in s.ledger_after if e["idempotency_key"] in keys],
    }


# --- background load ------------------------------------------------------


def _every(
    period: float, stop: threading.Event, name: str, step: Callable[[], None], errors: Counter[str]
) -> threading.Thread:
    def loop() -> None:
        while not stop.wait(period):
            try:
                step()
            except Exception as exc:  # the database may be restarting: count it, go on
                errors[f"{name}: {type(exc).__name__}"] += 1

    return threading.Thread(target=loop, name=name, daemon=True)


def _sample(
    db_url: str, injector: faults.Injector, into: list[tuple[float, int]]
) -> Callable[[], None]:
    def step() -> None:
        with psycopg.connect(db_url, connect_timeout=3) as conn:
            row = conn.execute(catchup.DUE_SQL).fetchone()
        into.append((round(injector.elapsed(), 1), int(row[0]) if row else 0))

    return step


def _trickle(work: Workload, seed: float) -> Callable[[], None]:
    rng = random.Random(seed)
    return lambda: work.create_over_http(rng, replay=rng.random() < 0.3) and None


def _cancels(work: Workload, seed: float) -> Callable[[], None]:
    rng = random.Random(seed)
    return lambda: work.cancel_one(rng)


def _route(spec: str, wired: bool) -> str:
    """Where the simulator posts receipts: Twilio's route where Twilio's wire
    is spoken (it signs the URL it posts to, and the relay forwards each
    receipt to its signer's route), the simulator's without wires."""
    providers = wired_in(spec) if wired else set()
    if not providers:
        return "simulator"
    return "twilio" if "twilio" in providers else sorted(providers)[0]
