"""The worker's steps: claim, send, record; reconcile, sweep and the rest.

Each step runs once and returns, so tests drive a worker with a manual
clock; `dispatch/runner.py` runs them on threads. A send's group is
recorded in one transaction, and a call starts only after its durable
"call started" mark committed (`dispatch/call_start.py`).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.dispatch import faults
from tidings.dispatch.allowance import consume, spend_keys
from tidings.dispatch.backoff import PauseKey, Pauses, note_answers, says_back_off
from tidings.dispatch.boundaries import call_span, claim_spans, intent_context, note_answer
from tidings.dispatch.call_start import CallStarts, Verdict, verdict_of
from tidings.dispatch.claim import Claimed, ClaimRequest, claim_batch
from tidings.dispatch.event_push import EventPusher
from tidings.dispatch.facts import recipient_facts
from tidings.dispatch.gate import RecipientFacts
from tidings.dispatch.message import Minter, PrepareError, TemplateCache, prepare
from tidings.dispatch.minting import MintUnavailable
from tidings.dispatch.provider_call import call_provider
from tidings.dispatch.quarantine import claim_row_by_row
from tidings.dispatch.reconcile import run_checks
from tidings.dispatch.record import (
    IntentOutcome,
    Sent,
    record_limit_deferred,
    record_prepare_failure,
    record_released,
    record_results,
)
from tidings.dispatch.sweep import sweep
from tidings.dispatch.window import Window
from tidings.dispatch.withheld import record_withheld
from tidings.dispatch.worker_config import WorkerConfig as WorkerConfig  # callers build both
from tidings.jobs.prepare import prepare_next
from tidings.observability.alerts import AlertSweeper
from tidings.observability.process_metrics import record_claim
from tidings.platform.outbound import AddressPolicy, OutboundClient
from tidings.providers.accounts import Factory, ProviderAccounts, from_environment
from tidings.providers.base import ProviderAdapter
from tidings.providers.outcomes import RejectCode, Retryable
from tidings.runtime import Runtime
from tidings.store import ledger
from tidings.store.attempts import AttemptRef, CallMark, mark_calls_started
from tidings.store.isolation import UNREADABLE

log = logging.getLogger("tidings.worker")
MINT_RETRY_SECONDS = 30.0
RECORD_TRIES = 3


class WorkerSteps:
    """A worker's state and its steps; `runner.Worker` adds the threads."""

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
        self.runtime = runtime
        self.adapters = dict(adapters)  # channel -> adapter
        # Every account attempts went through, retired ones built on demand.
        self.accounts = ProviderAccounts(
            {a.account: a for a in self.adapters.values()}, accounts_factory
        )
        self.config = config or WorkerConfig()
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{id(self) & 0xFFFF:x}"
        self.minters = dict(minters or {})
        self.facts = facts
        self.rng = random.Random(self.config.seed)
        self.templates = TemplateCache(runtime.settings.render_limits())
        self._windows = {
            channel: Window(max(1, self.config.concurrency.get(channel, 4)), self.config.batch_size)
            for channel in self.adapters
        }
        self._inflight: set[Any] = set()
        self._pauses = Pauses(runtime.db, self.rng)
        self._inflight_lock = threading.Lock()
        self._starts: CallStarts[Claimed] = CallStarts(self._mark_started, lambda c: c.intent.id)
        self.alerts = AlertSweeper(runtime)
        self._checks = (
            ThreadPoolExecutor(self.config.reconcile_concurrency, thread_name_prefix="check")
            if self.config.reconcile_concurrency > 1
            else None
        )
        self.event_pusher = EventPusher(
            runtime.db,
            runtime.vault,
            runtime.clock,
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
            channel,
            limit,
            self.owner,
            self.config.lease_seconds,
            self.adapters[channel].account,
            urgent_share=self.config.urgent_share,
            deadline_horizon_seconds=self.config.deadline_horizon_seconds,
        )
        started = time.monotonic()
        began = time.time_ns()
        claimed = self._claim(request)
        claim_spans(request, claimed, began, time.time_ns())
        self._log_claimed(claimed)
        urgent = sum(1 for c in claimed if c.intent.job_id is None)
        record_claim(channel, time.monotonic() - started, urgent, len(claimed) - urgent)
        if claimed:
            faults.point("after_claim")
        return claimed

    def _claim(self, request: ClaimRequest) -> list[Claimed]:
        try:
            with self.runtime.db.transaction() as conn:
                return claim_batch(conn, request, self.runtime.clock.now(), self.facts)
        except UNREADABLE as exc:
            # One row of the batch cannot be read (invariant 11): claim it row
            # by row, so that row is quarantined alone and the rest is sent.
            log.warning("dispatch %s: unreadable batch (%s)", request.channel, type(exc).__name__)
            return claim_row_by_row(self.runtime.db, request, self.runtime.clock.now(), self.facts)

    def send_and_record(self, claimed: Claimed) -> IntentOutcome:
        self._hold([claimed])
        return self.record([self.send(claimed)])[0]

    def send(self, claimed: Claimed) -> Sent | IntentOutcome:
        """Prepare and make the provider call; the answer, or an outcome
        already recorded when no call could be made."""
        adapter = self.adapters[claimed.intent.channel]
        with self._context(claimed):
            try:
                return self._send(adapter, claimed)
            except BaseException:
                self._release([claimed])
                raise

    def record(self, sent: list[Sent | IntentOutcome]) -> list[IntentOutcome]:
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
                message_id = getattr(item.result, "provider_message_id", None)
                with self._context(item.claimed):
                    log.info(
                        "attempt recorded",
                        extra={"intent_outcome": outcome, "provider_message_id": message_id},
                    )
        return results

    def _record_group(self, answers: list[Sent]) -> list[IntentOutcome]:
        # A deadlock or serialization failure rolled the whole group back:
        # nothing of it was written, so it is simply recorded again.
        for attempt in range(1, RECORD_TRIES + 1):
            try:
                with self.runtime.db.transaction() as conn:
                    now = self.runtime.clock.now()
                    outcomes = record_results(conn, answers, now, self.rng)
                    paused = note_answers(conn, answers, now, self.rng)
                self._pauses.learn(paused, now)
                return outcomes
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

    def _context(self, claimed: Claimed) -> Any:
        provider = self.adapters[claimed.intent.channel].account
        return intent_context(claimed.intent, provider=provider, attempt_key=claimed.attempt_key)

    def _log_claimed(self, claimed: Sequence[Claimed]) -> None:
        """The claim boundary, one line per intent (R002.10)."""
        if not log.isEnabledFor(logging.INFO):  # spare each claim its log context
            return
        for item in claimed:
            with self._context(item):
                log.info("intent claimed", extra={"attempt": item.n})

    def _send(self, adapter: ProviderAdapter, claimed: Claimed) -> Sent | IntentOutcome:
        try:
            message, segments, encoding = prepare(
                self.runtime.db,
                claimed,
                self.runtime.vault,
                self.templates,
                self.minters,
                self.runtime.settings.senders(),
            )
        except PrepareError as error:
            with self.runtime.db.transaction() as conn:
                outcome = record_prepare_failure(
                    conn, claimed, error.code, self.runtime.clock.now()
                )
            self._release([claimed])
            return outcome
        except MintUnavailable:
            # The application could not mint a token now: nothing was sent.
            retry = Retryable(RejectCode.PROVIDER_ERROR, MINT_RETRY_SECONDS, "token minting")
            return Sent(claimed, retry)
        if segments is not None:
            keys = spend_keys(claimed.intent, claimed.policy, claimed.provider, segments)
            if keys:
                with self.runtime.db.transaction() as conn:
                    room = consume(conn, claimed.intent.tenant_id, keys, self.runtime.clock.now())
                    if not room.allowed:
                        del message
                        outcome = record_limit_deferred(
                            conn, claimed, room, self.runtime.clock.now()
                        )
                if not room.allowed:
                    self._release([claimed])
                    return outcome
        paused_until = self._pauses.until(
            claimed.provider, claimed.intent.tenant_id, self.runtime.clock.now()
        )
        if paused_until is not None:  # before the call-started mark: no call is made
            del message
            return self._hand_back_paused(claimed, paused_until)
        expires_at = claimed.intent.expires_at
        if expires_at is not None and self.runtime.clock.now() >= expires_at:
            verdict = Verdict.EXPIRED  # while it waited for its call
        else:
            faults.point("before_mark")
            verdict = self._starts.verdict(claimed)
        if verdict is not Verdict.GO:
            del message
            return self._not_called(claimed, verdict)
        faults.point("before_send")
        log.info("provider call")
        started = time.monotonic()
        with call_span(claimed) as span:
            result = call_provider(adapter, message, claimed.attempt_key)
            note_answer(span, result)
        if not isinstance(result, Retryable):  # a fast 429 must not widen the window
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
        sent = Sent(claimed, result, segments, encoding)
        if says_back_off(result):
            return self._pauses.note_at_once(sent, self.runtime.clock.now())
        return sent

    def _hand_back_paused(self, claimed: Claimed, until: datetime) -> IntentOutcome:
        """Claimed before its account paused: due again when the pause ends."""
        try:
            with self.runtime.db.transaction() as conn:
                return record_released(
                    conn, claimed, self.runtime.clock.now(), code="PROVIDER_PAUSED", due_at=until
                )
        finally:
            self._release([claimed])

    def _mark_started(self, claims: Sequence[Claimed]) -> dict[Hashable, Verdict]:
        marks = {
            c.intent.id: CallMark(
                AttemptRef(c.intent.tenant_id, c.intent.id, c.n),
                c.intent.version,
                opted_out=c.opted_out,
                suppressed=c.suppressed,
                account=c.provider,
            )
            for c in claims
        }
        now = self.runtime.clock.now()
        with self.runtime.db.statements() as conn:
            found = mark_calls_started(conn, list(marks.values()), self.owner, now)
        learnt: dict[PauseKey, datetime] = {  # another worker's pause: this one keeps it too
            (m.account, m.ref.tenant_id): until
            for m in marks.values()
            if (until := getattr(found.get(m.ref), "paused_until", None)) is not None
        }
        self._pauses.learn(learnt, now)
        return {k: verdict_of(found.get(m.ref)) for k, m in marks.items()}

    def _not_called(self, claimed: Claimed, verdict: Verdict) -> IntentOutcome:
        """The read before the call found the claim no longer stands."""
        due_at = self._pauses.until(
            claimed.provider, claimed.intent.tenant_id, self.runtime.clock.now()
        )
        try:
            return record_withheld(
                self.runtime.db, claimed, verdict, self.runtime.clock.now(), due_at
            )
        finally:
            self._release([claimed])

    def reconcile_for(self, budget_seconds: float, limit: int = 100) -> int:
        """Rounds of checks while a whole round was due, for at most about
        `budget_seconds`: a backlog of due checks is worked down in one turn
        of the maintenance loop, not one round of `limit` per second."""
        started, done = time.monotonic(), 0
        while True:
            found = self.reconcile_once(limit)
            done += found
            if found < limit or time.monotonic() - started >= budget_seconds:
                return done

    def reconcile_once(self, limit: int = 100) -> int:
        return run_checks(
            self.runtime.db,
            self.accounts,
            self.runtime.clock.now(),
            self.rng,
            limit,
            self.config.not_received_after,
            self.runtime.vault,
            self._checks,
        )

    def sweep_once(self) -> dict[str, int]:
        return sweep(self.runtime.db, self.runtime.clock.now())

    def push_events_once(self) -> int:
        return self.event_pusher.push_once()

    def prepare_jobs_once(self, budget_seconds: float | None = None) -> int:
        """Prepare the oldest waiting job (for at most `budget_seconds`)."""
        found = prepare_next(self.runtime.db, self.runtime.clock.now(), budget_seconds)
        return 1 if found is not None else 0

    def heartbeat(self) -> int:
        with self._inflight_lock:
            ids = list(self._inflight)
        if not ids:
            return 0
        with self.runtime.db.transaction() as conn:
            return ledger.heartbeat(
                conn,
                self.owner,
                ids,
                self.runtime.clock.now() + timedelta(seconds=self.config.lease_seconds),
            )
