"""The worker: its steps (dispatch/steps.py) on threads, until stopped.

One dispatch thread per channel, each with its own concurrency budget, so
a throttled channel cannot starve the other. A thread wakes on
LISTEN/NOTIFY when intents are created and falls back to a timed scan.
Beside them: the LISTEN thread, maintenance (heartbeat, sweep, alerts,
reconciliation, purge), job preparation and event pushes. Stopping
(SIGTERM) lets in-flight sends finish and be recorded: nothing is left
leased.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

import psycopg

from tidings.dispatch.call_start import MarkFailed
from tidings.dispatch.canary import CanarySchedule
from tidings.dispatch.claim import Claimed
from tidings.dispatch.facts import recipient_facts
from tidings.dispatch.gate import RecipientFacts
from tidings.dispatch.inbox import Inbox
from tidings.dispatch.message import Minter
from tidings.dispatch.record import IntentOutcome, Sent, record_released
from tidings.dispatch.retention import purge
from tidings.dispatch.send_queue import SendQueue
from tidings.dispatch.steps import WorkerConfig, WorkerSteps
from tidings.dispatch.window import EXPIRES_BEFORE_TURN
from tidings.platform.signal_wait import wait_for_signal
from tidings.providers.accounts import Factory, from_environment
from tidings.providers.base import ProviderAdapter
from tidings.runtime import Runtime
from tidings.store import wakeups

log = logging.getLogger("tidings.worker")
# How long the preparation thread works on a job before it looks at `stop`.
PREPARE_BUDGET_SECONDS = 1.0
# How long one maintenance turn may spend working down due status checks.
RECONCILE_BUDGET_SECONDS = 2.0
# Beyond the drain's lease: closing connections, the last log lines.
STOP_GRACE_SECONDS = 2.0


class Worker(WorkerSteps):
    """A worker's steps on threads: `Worker(runtime, adapters).run(stop)`."""

    def __init__(
        self,
        runtime: Runtime,
        adapters: Mapping[str, ProviderAdapter],
        *,
        config: WorkerConfig | None = None,
        owner: str | None = None,
        minters: Mapping[str, Minter] | None = None,
        facts: RecipientFacts = recipient_facts,
        accounts_factory: Factory | None = from_environment,
    ) -> None:
        super().__init__(
            runtime,
            adapters,
            config=config,
            owner=owner,
            minters=minters,
            facts=facts,
            accounts_factory=accounts_factory,
        )
        self._inboxes = {channel: Inbox() for channel in self.adapters}
        self._pending: dict[str, dict[Future[Sent | IntentOutcome], Claimed]] = {}
        self._queues = {channel: SendQueue() for channel in self.adapters}
        # New intents were announced since the last claim (a ring).
        self._announced = dict.fromkeys(self.adapters, False)
        # Synthetic canaries (TIDINGS_CANARY_INTERVAL_SECONDS; off by default).
        self.canaries = CanarySchedule(runtime, self.adapters)
        self._canary_thread: threading.Thread | None = None

    def run(self, stop: threading.Event) -> int:
        """Work until `stop` is set, then drain for at most one lease.

        Sends whose call has not started are handed back at once (due
        again, nothing sent); calls under way get the lease to finish and be
        recorded. Whatever is still unrecorded after that is left to lease
        recovery, exactly as after a crash, so a stop never waits on a
        stalled provider or an unreachable database. Returns how many calls
        were left so: a process may exit without waiting for them.
        """
        threads = [
            threading.Thread(
                target=self._channel_loop, args=(c, stop), name=f"dispatch-{c}", daemon=True
            )
            for c in self.adapters
        ]
        if self.runtime.listen_url is not None:
            threads.append(
                threading.Thread(target=self._listen, args=(stop,), name="listen", daemon=True)
            )
        else:  # behind a transaction pooler with no direct URL: the timed scan
            log.info("no LISTEN connection: new intents are found by the timed scan")
        threads.append(
            threading.Thread(target=self._maintain, args=(stop,), name="maintain", daemon=True)
        )
        threads.append(
            threading.Thread(target=self._prepare, args=(stop,), name="prepare", daemon=True)
        )
        threads.append(
            threading.Thread(
                target=self.event_pusher.run,
                args=(stop, self.config.maintenance_interval),
                name="event-push",
                daemon=True,
            )
        )
        for thread in threads:
            thread.start()
        wait_for_signal(stop)  # not stop.wait(): see signal_wait.py
        for inbox in self._inboxes.values():
            inbox.ring()
        deadline = time.monotonic() + self.config.lease_seconds + STOP_GRACE_SECONDS
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        return sum(len(pending) for pending in self._pending.values()) + sum(
            len(queue) for queue in self._queues.values()
        )

    def _channel_loop(self, channel: str, stop: threading.Event) -> None:
        window = self._windows[channel]  # its threads: the channel's concurrency budget
        pool = ThreadPoolExecutor(window.threads, thread_name_prefix=f"send-{channel}")
        pending: dict[Future[Sent | IntentOutcome], Claimed] = {}
        self._pending[channel] = pending
        queue = self._queues[channel]
        drain_until: float | None = None
        try:
            while pending or queue or not stop.is_set():
                if stop.is_set():
                    drain_until = drain_until or time.monotonic() + self.config.lease_seconds
                    if time.monotonic() >= drain_until:
                        log.warning(
                            "dispatch %s: stopping with %d calls unrecorded; "
                            "lease recovery settles them",
                            channel,
                            len(pending),
                        )
                        return
                try:
                    if stop.is_set():
                        self._hand_back_unstarted(pending, queue)
                    self._pump(channel, pool, pending, window.size(self.runtime.clock.now()), stop)
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    log.warning("dispatch %s: database unavailable: %s", channel, exc)
                    stop.wait(1.0)
                except Exception:  # a bug must not end the loop; leases recover the rest
                    log.exception("dispatch %s: unexpected error", channel)
                    stop.wait(1.0)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _hand_back_unstarted(
        self, pending: dict[Future[Sent | IntentOutcome], Claimed], queue: SendQueue
    ) -> None:
        """A stopping worker gives back the claims it has not begun to send."""
        unstarted = [future for future in pending if future.cancel()]
        claims = [pending.pop(future) for future in unstarted] + queue.take_all()
        if not claims:
            return
        try:
            with self.runtime.db.transaction() as conn:
                for claimed in claims:
                    record_released(conn, claimed, self.runtime.clock.now())
        finally:
            self._release(claims)
        log.info("handed back %d unsent claims", len(claims))

    def _hand_back_late(self, channel: str, claimed: list[Claimed], ahead: int) -> list[Claimed]:
        """Claims whose turn would end after their token expires (window.py,
        R003.9) go back, due at their expiry, where policy expires them
        unless the window frees up first: nothing is sent after expiry."""
        now = self.runtime.clock.now()
        late = self._windows[channel].fit([c.intent.expires_at for c in claimed], now, ahead=ahead)
        if not late:
            return claimed
        back = [claimed[i] for i in late]
        try:
            with self.runtime.db.transaction() as conn:
                for claim in back:
                    record_released(
                        conn, claim, now, code=EXPIRES_BEFORE_TURN, due_at=claim.intent.expires_at
                    )
        finally:
            self._release(back)
        log.warning(
            "dispatch %s: handed back %d claims that would expire before their turn (%s)",
            channel,
            len(back),
            EXPIRES_BEFORE_TURN,
        )
        gone = set(late)
        return [c for i, c in enumerate(claimed) if i not in gone]

    def _pump(
        self,
        channel: str,
        pool: ThreadPoolExecutor,
        pending: dict[Future[Sent | IntentOutcome], Claimed],
        size: int,
        stop: threading.Event,
    ) -> None:
        """One turn: top up the sends in flight, then record what finished.

        Claims come in chunks of at least half the window, so the claim's
        cost is shared, or at once when new intents were announced: the
        claim takes single intents first (docs/concepts/lanes.md), so one
        created while the window is full of a job's claims waits for no
        chunk to free up. Answers are recorded as they arrive, so one slow
        provider call holds up only itself, never the calls around it. An
        answer that cannot be recorded is let go: its lease lapses and
        reconciliation looks it up, as after a crash.
        """
        queue = self._queues[channel]
        room = size - len(pending) - len(queue)
        inbox = self._inboxes[channel]
        announced, self._announced[channel] = self._announced[channel], False
        if not stop.is_set() and (room >= max(1, size // 2) or announced):
            claimed = self.claim(channel, max(room, 1))
            self._hold(claimed)
            claimed = self._hand_back_late(channel, claimed, len(pending) + len(queue))
            queue.push(claimed)
        self._feed(channel, pool, pending)
        # New intents (NOTIFY) wake the loop even while answers are awaited,
        # so a create at light load is claimed at once, not after a timeout.
        answers = []
        for arrived in inbox.take(self.config.idle_wait):
            if arrived is Inbox.RING:
                self._announced[channel] = True
                continue
            if pending.pop(arrived, None) is None:  # handed back (canceled) after it was queued
                continue
            try:
                answers.append(arrived.result())
            except MarkFailed as exc:  # the database went away first: the call never started
                log.warning("dispatch %s: call not started, no mark: %s", channel, exc)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                # The database went away during the send's own reads or writes
                # (a failover): its lease recovers it, as after a crash.
                log.warning("dispatch %s: database unavailable during a send: %s", channel, exc)
            except Exception:  # that one's lease recovers it; the others still record
                log.exception("dispatch %s: a send failed unexpectedly", channel)
        self._feed(channel, pool, pending)  # the threads go on while the answers are recorded
        self.record(answers)

    def _feed(
        self,
        channel: str,
        pool: ThreadPoolExecutor,
        pending: dict[Future[Sent | IntentOutcome], Claimed],
    ) -> None:
        """Hand waiting claims to the send threads as they free up, singles first."""
        inbox = self._inboxes[channel]
        for item in self._queues[channel].ready(self._windows[channel].threads, len(pending)):
            future = pool.submit(self.send, item)
            pending[future] = item
            future.add_done_callback(inbox.deliver)

    def _listen(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                url = self.runtime.listen_url
                assert url is not None
                with psycopg.connect(url, autocommit=True) as conn:
                    wakeups.listen(conn)
                    while not stop.is_set():
                        for note in conn.notifies(timeout=0.5, stop_after=1):
                            inbox = self._inboxes.get(note.payload)
                            if inbox is not None:
                                inbox.ring()
            except psycopg.Error as exc:
                log.warning("listen: %s", exc)
                stop.wait(1.0)

    def _prepare(self, stop: threading.Event) -> None:
        """Turn frozen jobs into intents, on a thread of its own.

        Preparing a million recipients takes minutes. In the maintenance
        round it held up the heartbeat, the sweep, the alerts and
        reconciliation of its worker until the job was done (the
        unreconciled alert of the 1M benchmark read "last successful
        reconciliation never"). In budgets, so a stop is not held up either.
        """
        found: list[int] = []
        while not stop.is_set():
            found.clear()
            _maintenance_step(
                "prepare jobs", lambda: found.append(self.prepare_jobs_once(PREPARE_BUDGET_SECONDS))
            )
            if not any(found):  # none waits, or it failed: look again later
                stop.wait(self.config.maintenance_interval)

    def _maintain(self, stop: threading.Event) -> None:
        last_purge = -math.inf  # at start, then every purge_interval
        steps = (
            ("heartbeat", self.heartbeat),
            ("sweep", self.sweep_once),
            ("alerts", lambda: self.alerts.tick(self.runtime.clock.now())),
            # No event push here: it waits on tenants' servers (event-push thread).
            # Within a budget, so the heartbeat's turn comes well inside a lease.
            ("reconcile", lambda: self.reconcile_for(RECONCILE_BUDGET_SECONDS)),
            ("canary", self._start_canary),
        )
        while not stop.wait(self.config.maintenance_interval):
            # Each step on its own: one that fails (the alert scan over a
            # million-intent backlog ran into its statement timeout) must
            # not cost the others, reconciliation above all, their turn.
            for name, step in steps:
                _maintenance_step(name, step)
            # An infinite interval: retention runs elsewhere (`tidings purge`).
            due = math.isfinite(self.config.purge_interval) and (
                time.monotonic() - last_purge >= self.config.purge_interval
            )
            if due and _maintenance_step(
                "purge", lambda: purge(self.runtime.db, self.runtime.clock.now())
            ):
                last_purge = time.monotonic()

    def _start_canary(self) -> None:
        """A due canary round, on a thread of its own: its provider calls
        (each within the adapter's timeout) never hold up the heartbeat."""
        now = self.runtime.clock.now()
        busy = self._canary_thread is not None and self._canary_thread.is_alive()
        if busy or not self.canaries.due(now):
            return
        self._canary_thread = threading.Thread(
            target=_maintenance_step,
            args=("canary", lambda: self.canaries.tick(now)),
            name="canary",
            daemon=True,
        )
        self._canary_thread.start()


def _maintenance_step(name: str, step: Callable[[], object]) -> bool:
    try:
        step()
    except psycopg.Error as exc:
        log.warning("maintenance (%s): %s", name, exc)
        return False
    except Exception:  # keep sweeping and reconciling whatever one step did
        log.exception("maintenance (%s): unexpected error", name)
        return False
    return True
