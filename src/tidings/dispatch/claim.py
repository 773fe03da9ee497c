"""Claiming due intents: the one transaction before any provider call.

In it, each due intent is locked (SKIP LOCKED), checked by the gate, and
either moved to `sending` with a lease and a fresh attempt row, or deferred,
suppressed, expired or shadow-recorded. Network work starts only after this
transaction commits (invariant 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from tidings.dispatch.allowance import consume, rate_keys
from tidings.dispatch.gate import GateResult, RecipientFacts, bare_facts, decide
from tidings.domain.claiming import ClaimVerdict, claim_event, claim_verdict
from tidings.domain.errors import StaleTransition
from tidings.domain.intent import Intent
from tidings.domain.keys import attempt_key
from tidings.domain.policy import dispatch_action, limit_decision
from tidings.domain.policy_document import Policy
from tidings.domain.rollout import cohort_of
from tidings.observability.process_metrics import record_rate_limit_wait
from tidings.store import attempts, claims, controls, ledger, provider_pauses
from tidings.store.attempts import AttemptRef

Conn = psycopg.Connection[Any]

SHADOW_CODE = "SHADOW_MODE"


@dataclass(frozen=True)
class Claimed:
    intent: Intent  # as moved to `sending`: the version this worker holds
    n: int
    attempt_key: str
    provider: str
    policy: Policy
    # Read with the claim, so the send needs no further round trip for it.
    destination_ciphertext: bytes | None = None
    # What the claim read of the destination: an opt-out or suppression
    # committed after it stops the call (the call-started mark checks).
    opted_out: bool = False
    suppressed: bool = False


@dataclass(frozen=True)
class ClaimRequest:
    channel: str
    limit: int
    owner: str
    lease_seconds: float
    provider: str
    # The part of the batch single intents may take while jobs wait too.
    urgent_share: float = 0.9
    # A job intent this near its deadline goes before the jobs' shares.
    deadline_horizon_seconds: float = 600.0

    @property
    def lanes(self) -> claims.Lanes:
        """How the batch is shared (docs/concepts/lanes.md)."""
        urgent = max(1, math.ceil(self.limit * self.urgent_share))
        return claims.Lanes(urgent, self.deadline_horizon_seconds)


def claim_batch(
    conn: Conn,
    request: ClaimRequest,
    now: datetime,
    facts: RecipientFacts = bare_facts,
    only: tuple[str, UUID] | None = None,
) -> list[Claimed]:
    """Claim the due batch; or, with `only` (tenant, id), that one intent if
    it is due (dispatch/quarantine.py claims an unreadable batch so)."""
    if provider_pauses.paused_until(conn, request.provider, now) is not None:
        return []  # the provider said "back off": every worker waits (dispatch/backoff.py)
    channel, limit, account = request.channel, request.limit, request.provider
    if only is None:
        rows = claims.due(
            conn,
            channel=channel,
            now=now,
            limit=limit,
            account=account,
            lanes=request.lanes,
        )
    else:
        tenant_id, intent_id = only
        rows = claims.one(
            conn, tenant_id, intent_id, channel=channel, now=now, limit=limit, account=account
        )
    intents = [Intent.from_row(r) for r in rows]
    by_id = {r["id"]: r for r in rows}
    tenants = {i.tenant_id for i in intents}
    shadows = controls.shadow_controls(conn, tenants) if tenants else []
    moves = _Moves(conn, request, now)
    for intent in intents:
        if moves.started_for(intent):
            # A frequency cap counts the recipient's attempts; the one this
            # batch started must be in the table before the count.
            moves.flush()
        cohort = cohort_of(intent, shadows) if shadows else None
        shadow = cohort is not None and not cohort.live
        result = decide(conn, intent, now, shadow=shadow, facts=facts, row=by_id[intent.id])
        if cohort is not None:  # the decision's inputs say which side it fell on
            result = replace(result, inputs={**(result.inputs or {}), "cohort": cohort.inputs()})
        moves.add(_apply(conn, intent, result, request, now))
    moves.flush()
    return [
        replace(
            c,
            destination_ciphertext=by_id[c.intent.id]["destination_ciphertext"],
            opted_out=bool(by_id[c.intent.id]["fact_opted_out"]),
            suppressed=by_id[c.intent.id]["fact_suppressed"] is not None,
        )
        for c in moves.claimed
    ]


@dataclass(frozen=True)
class _Start:
    """A claim that opens an attempt: the move to `sending` plus its row."""

    step: ledger.Step
    n: int
    attempt_key: str
    policy: Policy


class _Moves:
    """The claim's writes, applied as one statement per kind for the batch."""

    def __init__(self, conn: Conn, request: ClaimRequest, now: datetime) -> None:
        self.conn, self.request, self.now = conn, request, now
        self.pending: list[ledger.Step | _Start] = []
        self.recipients: set[tuple[str, str]] = set()
        self.claimed: list[Claimed] = []

    def started_for(self, intent: Intent) -> bool:
        return (intent.tenant_id, intent.recipient_ref) in self.recipients

    def add(self, item: ledger.Step | _Start) -> None:
        self.pending.append(item)
        if isinstance(item, _Start):
            self.recipients.add((item.step.intent.tenant_id, item.step.intent.recipient_ref))

    def flush(self) -> None:
        items, self.pending = self.pending, []
        self.recipients.clear()
        steps = [i.step if isinstance(i, _Start) else i for i in items]
        moved = ledger.transition_many(self.conn, steps, now=self.now)
        if any(m is None for m in moved):
            # The rows are locked by this transaction: nobody else can move them.
            raise StaleTransition("a claimed intent moved on under its row lock")
        starts = [(i, m) for i, m in zip(items, moved, strict=True) if isinstance(i, _Start)]
        if not starts:
            return
        openings = [
            attempts.Opening(
                AttemptRef(s.step.intent.tenant_id, s.step.intent.id, s.n),
                s.attempt_key,
                s.step.intent.channel,
            )
            for s, _ in starts
        ]
        attempts.open_many(self.conn, openings, self.request.provider, self.now)
        for start, intent in starts:
            assert intent is not None
            self.claimed.append(
                Claimed(intent, start.n, start.attempt_key, self.request.provider, start.policy)
            )


def _detail(result: GateResult) -> dict[str, Any]:
    """The claim transition's input: the decision and what it read."""
    decision = result.decision
    detail: dict[str, Any] = {"code": decision.code, "verdict": result.verdict.value}
    if decision.detail:
        detail["detail"] = decision.detail
    if result.inputs is not None:
        detail["decision_inputs"] = result.inputs
    return detail


def _apply(
    conn: Conn, intent: Intent, result: GateResult, request: ClaimRequest, now: datetime
) -> ledger.Step | _Start:
    decision = result.decision
    detail = _detail(result)
    actor = f"worker:{request.owner}"
    code, version = decision.code, decision.policy_version
    if result.verdict is ClaimVerdict.SEND:
        policy = result.policy
        assert policy is not None  # only a published policy allows a send
        room = consume(conn, intent.tenant_id, rate_keys(intent, policy, request.provider), now)
        if room.allowed:
            return _start_attempt(intent, policy, result, request, now, actor, detail)
        decision = limit_decision(policy, room, now)
        if room.key is not None and decision.retry_after_seconds is not None:
            record_rate_limit_wait(room.key.scope, decision.retry_after_seconds)
        verdict = claim_verdict(decision, now=now, expires_at=intent.expires_at)
        result = GateResult(verdict, decision, result.policy, result.inputs)
        detail = _detail(result)
        code, version = decision.code, decision.policy_version
    event = claim_event(result.verdict)
    if result.verdict is ClaimVerdict.DEFER:
        move = ledger.Move(
            next_due_at=decision.not_before, decision_code=code, policy_version=version
        )
        if decision.not_before is not None:  # so the timeline says when it goes
            detail["next_attempt_at"] = decision.not_before.isoformat()
        if decision.retry_after_seconds is not None:
            detail["retry_after_seconds"] = decision.retry_after_seconds
    elif result.verdict is ClaimVerdict.SHADOW:
        # record what would have happened, never call a provider
        detail["would"] = "send" if decision.allowed else decision.code
        # what the claim would have done, for judging the rollout
        # (domain/shadow_comparison.py)
        detail["would_action"] = dispatch_action(decision, intent.expires_at)
        if decision.not_before is not None:
            detail["next_attempt_at"] = decision.not_before.isoformat()
        move = ledger.Move(decision_code=SHADOW_CODE, policy_version=decision.policy_version)
    else:
        move = ledger.Move(decision_code=code, policy_version=version)
    return ledger.Step(intent, event, actor, move, detail)


def _start_attempt(
    intent: Intent,
    policy: Policy,
    result: GateResult,
    request: ClaimRequest,
    now: datetime,
    actor: str,
    detail: dict[str, Any],
) -> _Start:
    n = intent.attempt_count + 1
    move = ledger.Move(
        lease_owner=request.owner,
        lease_expires_at=now + timedelta(seconds=request.lease_seconds),
        attempts_added=1,
        decision_code=result.decision.code,
        policy_version=result.decision.policy_version,
    )
    step = ledger.Step(
        intent, claim_event(ClaimVerdict.SEND), actor, move, {**detail, "attempt": n}
    )
    return _Start(step, n, attempt_key(intent.id, n), policy)
