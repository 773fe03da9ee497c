"""The worker: claim, send, record; reconcile and sweep on the side.

One dispatch thread per channel, each with its own concurrency budget, so
a throttled channel cannot starve the other. A thread wakes on
LISTEN/NOTIFY when intents are created and falls back to a timed scan.
Stopping (SIGTERM) lets in-flight sends finish and be recorded: nothing is
left leased.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, Final

import psycopg

from tidings.dispatch import faults
from tidings.dispatch.allowance import consume, spend_keys
from tidings.dispatch.claim import Claimed, ClaimRequest, claim_batch
from tidings.dispatch.event_push import EventPusher
from tidings.dispatch.facts import recipient_facts
from tidings.dispatch.gate import RecipientFacts
from tidings.dispatch.message import Minter, PrepareError, TemplateCache, prepare
from tidings.dispatch.minting import MintUnavailable
from tidings.dispatch.quarantine import UNREADABLE, claim_row_by_row
from tidings.dispatch.recheck import GroupCheck, Verdict
from tidings.dispatch.reconcile import run_checks
from tidings.dispatch.record import (
    Sent,
    record_limit_deferred,
    record_prepare_failure,
    record_released,
    record_results,
    record_withdrawn,
)
from tidings.dispatch.retention import purge
from tidings.dispatch.sweep import sweep
from tidings.dispatch.window import Window
from tidings.jobs.prepare import prepare_next
from tidings.observability.alerts import AlertSweeper
from tidings.observability.logging import log_context
from tidings.observability.metrics import (
    outcome_of,
    record_call_withheld,
    record_provider_call,
)
from tidings.outbound import AddressPolicy, OutboundClient
from tidings.providers.base import (
    AttachmentTooLarge,
    Indeterminate,
    ProviderAdapter,
    ProviderConfigError,
    RejectCode,
    Rejected,
    Retryable,
    SendResult,
)
from tidings.store.database import Row, execute, fetch_all

if TYPE_CHECKING:
    from tidings.client import Tidings

log = logging.getLogger("tidings.worker")
NOTIFY_CHANNEL = "tidings_due"
CONFIG_RETRY_SECONDS = 60.0
MINT_RETRY_SECONDS = 30.0
RECORD_TRIES = 3
# How long the preparation thread works on a job before it looks at `stop`.
PREPARE_BUDGET_SECONDS = 1.0
# Beyond the drain's lease: closing connections, the last log lines.
STOP_GRACE_SECONDS = 2.0


@dataclass
class WorkerConfig:
    batch_size: int = 256
    concurrency: Mapping[str, int] = field(default_factory=lambda: {"sms": 8, "email": 8})
    lease_seconds: float = 30.0
    idle_wait: float = 1.0
    maintenance_interval: float = 1.0
    purge_interval: float = 3600.0
    # See reconcile.NOT_RECEIVED_AFTER_SECONDS: must exceed the longest a
    # provider may take to record a request that is already on its way.
    not_received_after: float = 60.0
    # A call starts only after a read of its intent's committed state that
    # began at most this long before (dispatch/recheck.py); 0 reads before
    # every call.
    recheck_after: float = 0.05
    # Event pushes go to tenants' own servers: a pool of their own, this
    # many tenants at once, each request within this deadline overall.
    event_push_concurrency: int = 4
    event_push_deadline: float = 10.0
    seed: int | None = None


class Inbox:
    """What wakes a channel's loop: a send that finished, or a ring (new due
    intents were announced, or the worker is stopping).

    One queue that finished sends and rings both land in, so the loop
    sleeps on one `get` and wakes for whichever comes first. Watching the
    sends with `concurrent.futures.wait` instead cost a lock round on every
    future in flight at each wake-up: a fifth of a worker's time with a
    window of 32 fast sends.
    """

    RING: Final = object()

    def __init__(self) -> None:
        self._queue: SimpleQueue[Any] = SimpleQueue()

    def ring(self) -> None:
        self._queue.put(self.RING)

    def deliver(self, future: Future[Any]) -> None:
        """A done-callback: the send's future, once it has finished."""
        self._queue.put(future)

    def take(self, timeout: float) -> list[Any]:
        """What arrived, waiting up to `timeout` for the first of it."""
        try:
            items = [self._queue.get(timeout=timeout)]
        except Empty:
            return []
        while True:
            try:
                items.append(self._queue.get_nowait())
            except Empty:
                return items


class Worker:
    def __init__(
        self,
        tidings: Tidings,
        adapters: Mapping[str, ProviderAdapter],
        *,
        config: WorkerConfig | None = None,
        owner: str | None = None,
        minters: Mapping[str, Minter] | None = None,
        facts: RecipientFacts = recipient_facts,
    ) -> None:
        self.t = tidings
        self.adapters = dict(adapters)  # channel -> adapter
        self.by_name = {a.name: a for a in self.adapters.values()}
        self.config = config or WorkerConfig()
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{id(self) & 0xFFFF:x}"
        self.minters = dict(minters or {})
        self.facts = facts
        self.rng = random.Random(self.config.seed)
        self.templates = TemplateCache(tidings.settings.render_limits())
        self._inboxes = {channel: Inbox() for channel in self.adapters}
        self._windows = {
            channel: Window(max(1, self.config.concurrency.get(channel, 4)), self.config.batch_size)
            for channel in self.adapters
        }
        self._inflight: set[Any] = set()
        self._inflight_lock = threading.Lock()
        self._pending: dict[str, dict[Future[Sent | str], Claimed]] = {}
        self._check: GroupCheck[Claimed] = GroupCheck(
            self._read_claims, lambda c: c.intent.id, self.config.recheck_after
        )
        self.alerts = AlertSweeper(tidings)
        self.event_pusher = EventPusher(
            tidings.db,
            tidings.vault,
            tidings.clock,
            OutboundClient(AddressPolicy.from_env(), self.config.event_push_deadline),
            self.config.event_push_concurrency,
        )

    # --- one step at a time (tests drive these with a manual clock) -----

    def dispatch_once(self, channel: str | None = None) -> int:
        done = 0
        for name in [channel] if channel else list(self.adapters):
            claimed = self.claim(name, self.config.batch_size)
            self._hold(claimed)
            self.record([self.send(item) for item in claimed])
            done += len(claimed)
        return done

    def claim(self, channel: str, limit: int) -> list[Claimed]:
        request = ClaimRequest(
            channel, limit, self.owner, self.config.lease_seconds, self.adapters[channel].name
        )
        read_at = time.monotonic()
        try:
            with self.t.db.transaction() as conn:
                claimed = claim_batch(conn, request, self.t.clock.now(), self.facts)
        except UNREADABLE as exc:
            # One row of the batch cannot be read (invariant 11): claim it row
            # by row, so that row is quarantined alone and the rest is sent.
            log.warning("dispatch %s: unreadable batch (%s)", channel, type(exc).__name__)
            claimed = claim_row_by_row(self.t.db, request, self.t.clock.now(), self.facts)
        self._check.claimed(claimed, read_at)
        if claimed:
            faults.point("after_claim")
        return claimed

    def send_and_record(self, claimed: Claimed) -> str:
        self._hold([claimed])
        return self.record([self.send(claimed)])[0]

    def send(self, claimed: Claimed) -> Sent | str:
        """Prepare and make the provider call; the answer, or an outcome
        already recorded when no call could be made."""
        adapter = self.adapters[claimed.intent.channel]
        with self._context(claimed):
            try:
                return self._send(adapter, claimed)
            except BaseException:
                self._release([claimed])
                raise

    def record(self, sent: list[Sent | str]) -> list[str]:
        """Record the answers of a group of calls in one transaction."""
        answers = [s for s in sent if isinstance(s, Sent)]
        try:
            if answers:
                outcomes = iter(self._record_group(answers))
                faults.point("after_record")
            else:
                outcomes = iter(())
            results = [next(outcomes) if isinstance(s, Sent) else s for s in sent]
        finally:
            self._release([s.claimed for s in answers])
        if not log.isEnabledFor(logging.INFO):  # spare each answer its log context
            return results
        for item, outcome in zip(sent, results, strict=True):
            if isinstance(item, Sent):
                with self._context(item.claimed):
                    log.info("attempt recorded", extra={"intent_outcome": outcome})
        return results

    def _record_group(self, answers: list[Sent]) -> list[str]:
        # A deadlock or serialization failure rolled the whole group back:
        # nothing of it was written, so it is simply recorded again.
        for attempt in range(1, RECORD_TRIES + 1):
            try:
                with self.t.db.transaction() as conn:
                    return record_results(conn, answers, self.t.clock.now(), self.rng)
            except psycopg.errors.TransactionRollback as exc:
                if attempt == RECORD_TRIES:
                    raise
                log.warning("recording %d answers: %s; again", len(answers), exc.sqlstate)
        raise AssertionError("unreachable")

    def _hold(self, claimed: list[Claimed]) -> None:
        with self._inflight_lock:  # queued sends keep their leases too
            self._inflight.update(c.intent.id for c in claimed)

    def _release(self, claimed: list[Claimed]) -> None:
        with self._inflight_lock:
            self._inflight.difference_update(c.intent.id for c in claimed)
        self._check.forget(claimed)

    def _context(self, claimed: Claimed) -> Any:
        intent = claimed.intent
        return log_context(
            tenant_id=intent.tenant_id,
            intent_id=str(intent.id),
            correlation_id=intent.correlation_id,
            channel=intent.channel,
            template_revision=f"{intent.template_name}@{intent.template_revision}",
            attempt_key=claimed.attempt_key,
            provider=self.adapters[intent.channel].name,
        )

    def _send(self, adapter: ProviderAdapter, claimed: Claimed) -> Sent | str:
        try:
            message, segments, encoding = prepare(
                self.t.db, claimed, self.t.vault, self.templates, self.minters
            )
        except PrepareError as error:
            with self.t.db.transaction() as conn:
                outcome = record_prepare_failure(conn, claimed, error.code, self.t.clock.now())
            self._release([claimed])
            return outcome
        except MintUnavailable:
            # The application could not mint a token now: nothing was sent.
            retry = Retryable(RejectCode.PROVIDER_ERROR, MINT_RETRY_SECONDS, "token minting")
            return Sent(claimed, retry)
        if segments is not None:
            keys = spend_keys(claimed.intent, claimed.policy, claimed.provider, segments)
            if keys:
                with self.t.db.transaction() as conn:
                    room = consume(conn, claimed.intent.tenant_id, keys, self.t.clock.now())
                    if not room.allowed:
                        del message
                        outcome = record_limit_deferred(conn, claimed, room, self.t.clock.now())
                if not room.allowed:
                    self._release([claimed])
                    return outcome
        expires_at = claimed.intent.expires_at
        if expires_at is not None and self.t.clock.now() >= expires_at:
            verdict = Verdict.EXPIRED  # while it waited for its call
        else:
            verdict = self._check.verdict(claimed)
        if verdict is not Verdict.GO:
            del message
            return self._not_called(claimed, verdict)
        faults.point("before_send")
        log.info("provider call")
        started = time.monotonic()
        result = _call(adapter, message, claimed.attempt_key)
        self._windows[claimed.intent.channel].observe(time.monotonic() - started)
        log.info(
            "provider answered",
            extra={
                "result": type(result).__name__,
                "provider_message_id": getattr(result, "provider_message_id", None),
                "code": getattr(getattr(result, "code", None), "value", None),
            },
        )
        del message  # the rendered body and destination go no further
        faults.point("after_send_before_record")
        return Sent(claimed, result, segments, encoding)

    def _read_claims(self, claims: Sequence[Claimed]) -> dict[Hashable, Verdict]:
        with self.t.db.statements() as conn:
            rows = fetch_all(
                conn,
                "still_claimed",
                {
                    "tenant_ids": [c.intent.tenant_id for c in claims],
                    "ids": [c.intent.id for c in claims],
                },
            )
        found = {row["id"]: row for row in rows}
        return {c.intent.id: _verdict(c, found.get(c.intent.id)) for c in claims}

    def _not_called(self, claimed: Claimed, verdict: Verdict) -> str:
        """The read before the call found the claim no longer stands."""
        now = self.t.clock.now()
        try:
            with self.t.db.transaction() as conn:
                if verdict is Verdict.KILLED:
                    outcome = record_released(conn, claimed, now, code="KILL_SWITCH")
                elif verdict is Verdict.EXPIRED:
                    # Due again at once: the gate expires it, as any claim would.
                    outcome = record_released(conn, claimed, now, code="EXPIRED")
                else:
                    outcome = record_withdrawn(conn, claimed, now)
        finally:
            self._release([claimed])
        record_call_withheld(claimed.intent.channel, verdict.value)
        log.info("provider call withheld", extra={"verdict": verdict.value})
        return outcome

    def reconcile_once(self, limit: int = 100) -> int:
        return run_checks(
            self.t.db,
            self.by_name,
            self.t.clock.now(),
            self.rng,
            limit,
            self.config.not_received_after,
        )

    def sweep_once(self) -> dict[str, int]:
        return sweep(self.t.db, self.t.clock.now())

    def push_events_once(self) -> int:
        return self.event_pusher.push_once()

    def prepare_jobs_once(self, budget_seconds: float | None = None) -> int:
        """Prepare the oldest waiting job (for at most `budget_seconds`)."""
        found = prepare_next(self.t.db, self.t.clock.now(), budget_seconds)
        return 1 if found is not None else 0

    def heartbeat(self) -> int:
        with self._inflight_lock:
            ids = list(self._inflight)
        if not ids:
            return 0
        with self.t.db.transaction() as conn:
            return execute(
                conn,
                "heartbeat",
                {
                    "owner": self.owner,
                    "ids": ids,
                    "lease_expires_at": self.t.clock.now()
                    + timedelta(seconds=self.config.lease_seconds),
                },
            )

    # --- the long-running loop -------------------------------------------

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
        threads.append(
            threading.Thread(target=self._listen, args=(stop,), name="listen", daemon=True)
        )
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
        stop.wait()
        for inbox in self._inboxes.values():
            inbox.ring()
        deadline = time.monotonic() + self.config.lease_seconds + STOP_GRACE_SECONDS
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        return sum(len(pending) for pending in self._pending.values())

    def _channel_loop(self, channel: str, stop: threading.Event) -> None:
        window = self._windows[channel]  # its threads: the channel's concurrency budget
        pool = ThreadPoolExecutor(window.threads, thread_name_prefix=f"send-{channel}")
        pending: dict[Future[Sent | str], Claimed] = {}
        self._pending[channel] = pending
        drain_until: float | None = None
        try:
            while pending or not stop.is_set():
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
                        self._hand_back_unstarted(pending)
                    self._pump(channel, pool, pending, window.size(), stop)
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    log.warning("dispatch %s: database unavailable: %s", channel, exc)
                    stop.wait(1.0)
                except Exception:  # a bug must not end the loop; leases recover the rest
                    log.exception("dispatch %s: unexpected error", channel)
                    stop.wait(1.0)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _hand_back_unstarted(self, pending: dict[Future[Sent | str], Claimed]) -> None:
        """A stopping worker gives back the claims it has not begun to send."""
        unstarted = [future for future in pending if future.cancel()]
        if not unstarted:
            return
        claims = [pending.pop(future) for future in unstarted]
        try:
            with self.t.db.transaction() as conn:
                for claimed in claims:
                    record_released(conn, claimed, self.t.clock.now())
        finally:
            self._release(claims)
        log.info("handed back %d unsent claims", len(claims))

    def _pump(
        self,
        channel: str,
        pool: ThreadPoolExecutor,
        pending: dict[Future[Sent | str], Claimed],
        size: int,
        stop: threading.Event,
    ) -> None:
        """One turn: top up the sends in flight, then record what finished.

        Claims come in chunks of at least half the window, so the claim's
        cost is shared; answers are recorded as they arrive, so one slow
        provider call holds up only itself, never the calls around it. An
        answer that cannot be recorded is let go: its lease lapses and
        reconciliation looks it up, as after a crash.
        """
        room = size - len(pending)
        inbox = self._inboxes[channel]
        if not stop.is_set() and room >= max(1, size // 2):
            claimed = self.claim(channel, room)
            self._hold(claimed)
            for item in claimed:
                future = pool.submit(self.send, item)
                pending[future] = item
                future.add_done_callback(inbox.deliver)
        # New intents (NOTIFY) wake the loop even while answers are awaited,
        # so a create at light load is claimed at once, not after a timeout.
        answers = []
        for arrived in inbox.take(self.config.idle_wait):
            # A ring, or a send handed back (canceled) after it was queued.
            if arrived is Inbox.RING or pending.pop(arrived, None) is None:
                continue
            try:
                answers.append(arrived.result())
            except Exception:  # that one's lease recovers it; the others still record
                log.exception("dispatch %s: a send failed unexpectedly", channel)
        self.record(answers)

    def _listen(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                with psycopg.connect(self.t.url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
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
        last_purge = 0.0
        steps = (
            ("heartbeat", self.heartbeat),
            ("sweep", self.sweep_once),
            ("alerts", lambda: self.alerts.tick(self.t.clock.now())),
            # No event push here: it waits on tenants' servers (event-push thread).
            ("reconcile", self.reconcile_once),
        )
        while not stop.wait(self.config.maintenance_interval):
            # Each step on its own: one that fails (the alert scan over a
            # million-intent backlog ran into its statement timeout) must
            # not cost the others, reconciliation above all, their turn.
            for name, step in steps:
                _maintenance_step(name, step)
            due = time.monotonic() - last_purge >= self.config.purge_interval
            if due and _maintenance_step("purge", lambda: purge(self.t.db, self.t.clock.now())):
                last_purge = time.monotonic()


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


def _verdict(claimed: Claimed, row: Row | None) -> Verdict:
    intent = claimed.intent
    if (
        row is None
        or row["state"] != "sending"
        or row["version"] != intent.version
        or row["lease_owner"] != intent.lease_owner
    ):
        return Verdict.WITHDRAWN
    return Verdict.KILLED if row["killed"] else Verdict.GO


def _call(adapter: ProviderAdapter, message: Any, key: str) -> SendResult:
    started = time.monotonic()
    result: SendResult | None = None
    try:
        result = _send(adapter, message, key)
        return result
    finally:
        seconds = time.monotonic() - started
        record_provider_call(adapter.name, message.channel, outcome_of(result), seconds)


def _send(adapter: ProviderAdapter, message: Any, key: str) -> SendResult:
    try:
        return adapter.send(message, key)
    except AttachmentTooLarge:  # before any request, and no retry makes it smaller
        return Rejected(RejectCode.ATTACHMENT_TOO_LARGE, "attachment too large")
    except ProviderConfigError as exc:  # raised before any request: certainly not sent
        log.error("adapter %s is misconfigured: %s", adapter.name, exc)
        return Retryable(RejectCode.PROVIDER_ERROR, CONFIG_RETRY_SECONDS, "configuration")
    except Exception as exc:  # an adapter bug must not read as "not sent"
        log.error("adapter %s raised %s", adapter.name, type(exc).__name__)
        return Indeterminate(RejectCode.PROVIDER_ERROR, type(exc).__name__)
