"""The faults a run injects, on a schedule drawn from its seed.

Each kind has an average period; a run of D seconds gets round(D / period)
faults of that kind (at least one), each at a seeded random moment in its
own slice of the run. The last act is always a PostgreSQL restart followed
by terminated connections, so the per-worker probes afterwards prove that
every surviving worker reconnected by itself.

Worker exits are classified: killed by us, killed by its own fault plan
(TIDINGS_FAULTS), stopped gracefully on SIGTERM, or unexpected, which is a
finding in itself (a worker must never die on its own).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from harness.skew import SKEW, FaketimeMissing, skewed

from . import database
from .hostile import Hostile
from .processes import Fleet, Proc, WorkerExit, call
from .webhooks import WebhookRelay
from .workload import Workload

T = TypeVar("T")

# Average seconds between two faults of a kind.
PERIODS: dict[str, float] = {
    "worker_sigkill": 12.0,
    "worker_fault_point": 15.0,
    "worker_sigterm": 40.0,
    "pg_terminate_backends": 15.0,
    "pg_restart": 50.0,
    "provider_storm": 30.0,
    "provider_slow": 60.0,
    "webhook_replay": 5.0,
    "flood": 45.0,
    "bulk_job": 25.0,
    # Once a run, at a random moment: the rival tenant turns hostile and
    # publishes a policy past the limits (issue #39, hostile.py).
    "hostile_policy": 1e9,
    # And replays every case of tests/security, all of them each round.
    "hostile_round": 30.0,
}
# The soak's (`--soak`) on top of the rest: a worker replaced by one whose
# host clock is five minutes off, ahead and behind in turn, reading the time
# from the database as every deployment should (docs/scaling.md); and, once,
# the retention purge of a month a year old (oldmonth.py).
SOAK_PERIODS: dict[str, float] = {"clock_skew": 300.0, "purge_old_month": 1e9}
# Opt-in (`--pause`): SIGSTOP a worker for longer than its lease, as a long GC
# pause or a frozen VM would. Off by default: see "Findings" in
# docs/reliability.md for what it shows.
OPTIONAL_PERIODS: dict[str, float] = {"worker_pause": 20.0}
# On a Patroni cluster (`--patroni`): the primary's postmaster killed, and a
# planned switchover (harness/failover/cluster.py).
FAILOVER_PERIODS: dict[str, float] = {"pg_failover": 60.0, "pg_switchover": 60.0}
PAUSE_BEYOND_LEASE_S = 4.0
# TIDINGS_FAULTS points; the commit-after-acceptance one is the one that matters most.
POINTS = (
    "after_send_before_record",
    "after_send_before_record",
    "after_send_before_record",
    "after_claim",
    "before_mark",
    "before_send",
    "after_record",
)
STORM_SECONDS = 8.0
BASELINE = {
    "latency_ms": 15,
    "rate_429": 0.02,
    "rate_5xx": 0.02,
    "rate_timeout": 0.0,
    # Taken, then answered 500 (#37): only a lookup or a receipt tells.
    "rate_5xx_after_accept": 0.01,
    "rate_lookup_5xx": 0.0,
    # Past the adapter's 10 s client timeout: the caller sees an ambiguous outcome.
    "timeout_stall_ms": 11_000,
    "receipt_delay_ms": 400,
    "duplicate_rate": 0.2,
    "reorder": True,
    "loss_rate": 0.1,
    "delivered_share": 0.9,
}
# A brownout: answers take a quarter of the 10 s client timeout, so sends that
# wait behind others in a worker's queue grow old while their leases tick.
SLOW = {"latency_ms": 3500}
SLOW_SECONDS = 10.0
SLOW_BURST = 150
# A storm hits the provider's lookups too: each failed one counts against its
# attempt's polling budget (dispatch/reconcile.py).
STORM = {
    "rate_429": 0.3,
    "rate_5xx": 0.15,
    "rate_timeout": 0.01,
    "rate_5xx_after_accept": 0.03,
    "loss_rate": 0.3,
    "rate_lookup_5xx": 0.3,
}
CALM = {
    "rate_429": 0.0,
    "rate_5xx": 0.0,
    "rate_timeout": 0.0,
    "rate_5xx_after_accept": 0.0,
    "rate_lookup_5xx": 0.0,
}


@dataclass
class FaultRecord:
    at_s: float  # seconds since the run started
    kind: str
    detail: str = ""
    outcome: str = "done"  # done, skipped, failed
    reason: str = ""


@dataclass
class Schedule:
    events: list[tuple[float, str]]

    @classmethod
    def draw(
        cls,
        duration: float,
        rng: random.Random,
        pauses: bool = False,
        periods: dict[str, float] | None = None,
    ) -> Schedule:
        events = []
        periods = {**(PERIODS if periods is None else periods)}
        periods |= OPTIONAL_PERIODS if pauses else {}
        for kind, period in periods.items():
            count = max(1, round(duration / period))
            slice_ = duration / count
            events += [((i + rng.uniform(0.1, 0.9)) * slice_, kind) for i in range(count)]
        events.sort()
        events += [(duration, "pg_restart"), (duration, "pg_terminate_backends")]
        return cls(events)


@dataclass
class Injector:
    fleet: Fleet
    server: database.Server
    relay: WebhookRelay
    workload: Workload
    rng: random.Random
    flood_size: int
    job_size: int
    started: float = field(default_factory=time.monotonic)
    records: list[FaultRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # violations seen while injecting
    exits: Counter[str] = field(default_factory=Counter)
    replay_effects: Counter[str] = field(default_factory=Counter)
    stop_seconds: list[float] = field(default_factory=list)  # SIGTERM to exit
    # Fault kinds defined elsewhere (switching.py's profile_switch).
    more_actions: dict[str, Callable[[], str]] = field(default_factory=dict)
    _skews: int = 0
    _killed: set[int] = field(default_factory=set)
    _terminated: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _helpers: list[threading.Thread] = field(default_factory=list)

    def run(self, schedule: Schedule, stop: threading.Event) -> None:
        """Inject the scheduled faults; supervise the workers in between."""
        if self.server.cluster is not None:  # and while a failover is awaited
            self.server.cluster.idle = self.supervise
        actions: dict[str, Callable[[], str]] = {
            "worker_sigkill": self.worker_sigkill,
            "worker_fault_point": self.worker_fault_point,
            "worker_sigterm": self.worker_sigterm,
            "worker_pause": self.worker_pause,
            "pg_terminate_backends": self.pg_terminate,
            "pg_restart": self.pg_restart,
            "pg_failover": self.pg_failover,
            "pg_switchover": self.pg_switchover,
            "provider_storm": self.provider_storm,
            "provider_slow": self.provider_slow,
            "webhook_replay": self.webhook_replay,
            "flood": self.flood,
            "bulk_job": self.bulk_job,
            "hostile_policy": lambda: self._hostile().policy(),
            "hostile_round": lambda: self._hostile().round(),
            "clock_skew": self.clock_skew,
            **self.more_actions,
        }
        for at, kind in schedule.events:
            while not stop.is_set() and self.elapsed() < at:
                self.supervise()
                stop.wait(min(0.25, max(0.0, at - self.elapsed())))
            if stop.is_set():
                break
            self._do(kind, actions[kind])
        for helper in self._helpers:
            helper.join(120)
        self.supervise()

    def _hostile(self) -> Hostile:
        if self.workload.hostile is None:
            raise RuntimeError("the workload was not prepared: no hostile tenant")
        return self.workload.hostile

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _do(self, kind: str, action: Callable[[], str]) -> None:
        record = FaultRecord(round(self.elapsed(), 2), kind)
        try:
            record.detail = action()
        except Skipped as skip:
            record.outcome, record.reason = "skipped", str(skip)
        except Exception as exc:  # a fault that cannot be injected is reported, not fatal
            record.outcome, record.reason = "failed", f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.records.append(record)

    # --- workers -----------------------------------------------------------

    def live(self) -> list[Proc]:
        # A worker already stopping gracefully is left to finish, a killed one
        # ignored (a SIGKILL is not reaped at once: the victim may still look alive).
        gone = self._terminated | self._killed
        return [w for w in self.fleet.live_workers() if w.pid not in gone]

    def _victim(self, ready: bool = False) -> Proc:
        live = self.live()
        if ready:  # SIGTERM before the handler is installed just ends the process;
            # an armed worker could reach its kill point while finishing its sends.
            live = [w for w in live if w.ready() and not w.faults]
        if not live:
            raise Skipped("no live worker")
        return self.rng.choice(live)

    def supervised_until(self, pick: Callable[[], T], within: float = 30.0) -> T:
        """`pick()` once it stops raising Skipped, the supervisor restarting
        workers meanwhile: on a busy machine, right after a failover or a
        round of kills, every worker may still be starting anew."""
        deadline = time.monotonic() + within
        while True:
            try:
                return pick()
            except Skipped:
                if time.monotonic() >= deadline:
                    raise
                self.supervise()
                time.sleep(0.5)

    def kill(self, worker: Proc) -> None:
        """SIGKILL, recorded as ours (a killed worker's exit is no finding)."""
        self._killed.add(worker.pid)
        worker.signal(signal.SIGKILL)

    def worker_sigkill(self) -> str:
        victim = self._victim()
        self.kill(victim)
        return f"{victim.name} (pid {victim.pid}) at a random point"

    def worker_fault_point(self) -> str:
        """Replace a worker by one that SIGKILLs itself at the N-th pass
        through a named point of the send path."""
        victim = self._victim()
        self._killed.add(victim.pid)
        victim.signal(signal.SIGKILL)
        spec = f"{self.rng.choice(POINTS)}:kill@{self.rng.randint(1, 12)}"
        armed = self.fleet.start_worker(faults=spec)
        return f"{victim.name} replaced by {armed.name} armed with {spec}"

    def clock_skew(self) -> str:
        """Replace a worker by one whose wall clock is five minutes ahead or
        behind. It must take over no lease still held, send nothing past its
        deadline and cut no Retry-After short: the invariants check all
        three, whoever sent."""
        way = ("ahead", "behind")[self._skews % 2]
        try:
            env = skewed(SKEW[way], "database")
        except FaketimeMissing as exc:
            raise Skipped(str(exc)) from exc
        self._skews += 1
        victim = self._victim()
        self._killed.add(victim.pid)
        victim.signal(signal.SIGKILL)
        skewed_worker = self.fleet.start_worker(env=env)
        return f"{victim.name} replaced by {skewed_worker.name}, its clock {SKEW[way]} ({way})"

    def worker_sigterm(self) -> str:
        """A graceful stop must finish and record in-flight sends, then exit 0."""
        live = self.live()
        if live and all(w.faults for w in live):
            # Fault points come every 15 s: every worker may be armed. One
            # killed (what it was armed for) is replaced by an unarmed one.
            armed = self.rng.choice(live)
            self._killed.add(armed.pid)
            armed.signal(signal.SIGKILL)
        victim = self.supervised_until(lambda: self._victim(ready=True))
        self._stop_gracefully(victim)
        return f"{victim.name} (pid {victim.pid})"

    def retire(self, worker: Proc) -> str:
        """Take a worker out of service, as a deploy does: gracefully if it
        can take a SIGTERM (ready, unarmed), else with SIGKILL."""
        if worker.ready() and not worker.faults:
            self._stop_gracefully(worker)
            return "stopped"
        self._killed.add(worker.pid)
        worker.signal(signal.SIGKILL)
        return "killed"

    def _stop_gracefully(self, victim: Proc) -> None:
        self._terminated.add(victim.pid)
        budget = self.fleet.lease_seconds * 4 + 15

        def stop() -> None:
            started = time.monotonic()
            code = victim.stop(budget)
            with self._lock:
                self.stop_seconds.append(round(time.monotonic() - started, 1))
                if code != 0:
                    self.problems.append(
                        f"{victim.name} answered SIGTERM with exit {code} (budget {budget:.0f} s)"
                    )

        helper = threading.Thread(target=stop, name="sigterm", daemon=True)
        helper.start()
        self._helpers.append(helper)

    def worker_pause(self) -> str:
        """Freeze a worker past its lease, then let it carry on as if nothing
        happened: whatever it was about to do, it now does late."""
        victim = self._victim()
        pause = self.fleet.lease_seconds + PAUSE_BEYOND_LEASE_S
        victim.signal(signal.SIGSTOP)
        timer = threading.Timer(pause, victim.signal, (signal.SIGCONT,))
        timer.daemon = True
        timer.start()
        return f"{victim.name} (pid {victim.pid}) stopped for {pause:.0f} s"

    def disarm(self, within: float = 60.0) -> list[str]:
        """Kill the armed workers whose fault point has not fired yet, and
        start unarmed replacements.

        Left armed, one would fire on the probes' own sends and read as a
        worker that failed to recover. A SIGKILL is what it was armed for.
        """
        armed = [w for w in self.fleet.live_workers() if w.faults]
        for worker in armed:
            self._killed.add(worker.pid)
            worker.signal(signal.SIGKILL)
        deadline = time.monotonic() + within
        while any(w.alive() for w in armed) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.supervise()
        while not all(w.ready() for w in self.fleet.live_workers()):
            if time.monotonic() >= deadline:
                break
            self.supervise()
            time.sleep(0.5)
        return [w.name for w in armed]

    def supervise(self) -> None:
        for gone in self.fleet.supervise():
            if gone.pid in self._killed:
                cause = "killed_by_harness"
            elif gone.pid in self._terminated:  # the stop helper judged the exit code
                cause = "graceful_stop" if gone.returncode == 0 else "sigterm_overran"
            elif gone.returncode == 1 and _start_failed(gone):
                # `tidings worker` migrates first and exits 1 if the database is
                # down at that moment; the supervisor starting it again is the
                # recovery (reported as a finding, not a violation).
                cause = "start_failed_database_unavailable"
            elif gone.faults and gone.returncode == -signal.SIGKILL:
                cause = "fault_point_fired"
                with self._lock:
                    self.records.append(
                        FaultRecord(round(self.elapsed(), 2), "fault_point_fired", gone.faults)
                    )
            else:
                cause = "unexpected_exit"
                with self._lock:
                    self.problems.append(
                        f"{gone.name} (pid {gone.pid}) exited by itself with {gone.returncode}"
                        f" after {gone.uptime_s:.1f} s; see its log"
                    )
            self.exits[cause] += 1

    # --- the database ------------------------------------------------------

    def pg_terminate(self) -> str:
        return f"{database.terminate_backends(self.fleet.db_url)} sessions terminated"

    def pg_restart(self) -> str:
        if not self.server.can_restart:
            raise Skipped(str(self.server.restart_skip_reason))
        return f"{self.server.kind} server back after {self.server.restart():.1f} s"

    def pg_failover(self) -> str:
        if self.server.cluster is None:
            raise Skipped("not a Patroni cluster")
        return self.server.cluster.fail_over()

    def pg_switchover(self) -> str:
        if self.server.cluster is None:
            raise Skipped("not a Patroni cluster")
        return self.server.cluster.switch_over()

    # --- the provider and its webhooks -------------------------------------

    def provider_storm(self) -> str:
        configure(self.fleet.sim_url, STORM)
        timer = threading.Timer(STORM_SECONDS, configure, (self.fleet.sim_url, BASELINE))
        timer.daemon = True
        timer.start()
        return f"{STORM} for {STORM_SECONDS:.0f} s"

    def provider_slow(self) -> str:
        """A brownout with a burst on top: workers claim full batches that
        take several slow rounds to send, the worst case for leases."""
        configure(self.fleet.sim_url, SLOW)
        restore = {"latency_ms": BASELINE["latency_ms"]}
        timer = threading.Timer(SLOW_SECONDS, configure, (self.fleet.sim_url, restore))
        timer.daemon = True
        timer.start()
        burst = self.workload.flood(SLOW_BURST)
        return f"{SLOW} for {SLOW_SECONDS:.0f} s, with a burst of {burst}"

    def webhook_replay(self) -> str:
        answers, effects = self.relay.replay(self.rng, 25)
        with self._lock:
            self.replay_effects.update(effects)
        return f"answers {dict(answers)}, effects {dict(effects)}"

    # --- load ----------------------------------------------------------------

    def flood(self) -> str:
        return f"{self.workload.flood(self.flood_size)} intents in one transaction"

    def bulk_job(self) -> str:
        self.workload.job(self.job_size, self.rng)
        return f"a job of {self.job_size} recipients"

    def summary(self) -> dict[str, Any]:
        with self._lock:
            by_kind: dict[str, Counter[str]] = {}
            for r in self.records:
                by_kind.setdefault(r.kind, Counter())[r.outcome] += 1
            return {
                "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
                "worker_exits": dict(self.exits),
                "replay_effects": dict(self.replay_effects),
                "graceful_stop_seconds": list(self.stop_seconds),
                "records": [asdict(r) for r in self.records],
            }


def _start_failed(gone: WorkerExit) -> bool:
    return gone.uptime_s < 30 and not gone.said_ready


class Skipped(Exception):
    """This fault is impossible here; the reason goes into the report."""


def configure(sim_url: str, changes: dict[str, Any]) -> None:
    answer = call("PUT", f"{sim_url}/_config", json=changes)
    if answer is None or answer.status_code != 200:
        raise RuntimeError(f"simulator refused {changes}")
