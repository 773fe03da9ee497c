"""Claiming due intents: the one transaction before any provider call.

In it, each due intent is locked (SKIP LOCKED), checked by the gate, and
either moved to `sending` with a lease and a fresh attempt row, or deferred,
suppressed, expired or shadow-recorded. Network work starts only after this
transaction commits (invariant 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.dispatch.allowance import consume, rate_keys
from tidings.dispatch.gate import GateResult, RecipientFacts, Verdict, bare_facts, decide
from tidings.domain.intent import Intent
from tidings.domain.keys import attempt_key
from tidings.domain.policy import Decision, Policy, dispatch_action, limit_decision
from tidings.domain.transitions import Event
from tidings.observability.metrics import record_rate_limit_wait
from tidings.store import ledger
from tidings.store.database import execute, fetch_all

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


@dataclass(frozen=True)
class ClaimRequest:
    channel: str
    limit: int
    owner: str
    lease_seconds: float
    provider: str


def claim_batch(
    conn: Conn, request: ClaimRequest, now: datetime, facts: RecipientFacts = bare_facts
) -> list[Claimed]:
    rows = fetch_all(
        conn, "claim_due", {"channel": request.channel, "now": now, "limit": request.limit}
    )
    intents = [Intent.from_row(r) for r in rows]
    by_id = {r["id"]: r for r in rows}
    shadowed = _shadow_scopes(conn, {i.tenant_id for i in intents})
    claimed = []
    for intent in intents:
        result = decide(
            conn, intent, now, shadow=_covered(intent, shadowed), facts=facts, row=by_id[intent.id]
        )
        done = _apply(conn, intent, result, request, now)
        if done is not None:
            ciphertext = by_id[intent.id]["destination_ciphertext"]
            claimed.append(replace(done, destination_ciphertext=ciphertext))
    return claimed


def _apply(
    conn: Conn, intent: Intent, result: GateResult, request: ClaimRequest, now: datetime
) -> Claimed | None:
    decision = result.decision
    detail: dict[str, Any] = {"code": decision.code, "verdict": result.verdict.value}
    if decision.detail:
        detail["detail"] = decision.detail
    actor = f"worker:{request.owner}"
    code, version = decision.code, decision.policy_version
    if result.verdict is Verdict.SEND:
        room = consume(
            conn, intent.tenant_id, rate_keys(intent, result.policy, request.provider), now
        )
        if room.allowed:
            return _start_attempt(conn, intent, result, request, now, actor, detail)
        decision = limit_decision(result.policy, room, now)
        if room.key is not None and decision.retry_after_seconds is not None:
            record_rate_limit_wait(room.key.scope, decision.retry_after_seconds)
        result = GateResult(_verdict_for(decision, intent), decision, result.policy)
        detail = {"code": decision.code, "verdict": result.verdict.value, "detail": decision.detail}
        code, version = decision.code, decision.policy_version
    if result.verdict is Verdict.DEFER:
        move = ledger.Move(
            next_due_at=decision.not_before, decision_code=code, policy_version=version
        )
        ledger.transition(conn, intent, Event.DEFER, now=now, actor=actor, move=move, detail=detail)
    elif result.verdict is Verdict.EXPIRE:
        move = ledger.Move(decision_code=code, policy_version=version)
        ledger.transition(
            conn, intent, Event.DEADLINE_PASSED, now=now, actor=actor, move=move, detail=detail
        )
    elif result.verdict is Verdict.SUPPRESS:
        move = ledger.Move(decision_code=code, policy_version=version)
        ledger.transition(
            conn, intent, Event.POLICY_DENIED, now=now, actor=actor, move=move, detail=detail
        )
    else:  # shadow: record what would have happened, never call a provider
        detail["would"] = "send" if decision.allowed else decision.code
        move = ledger.Move(decision_code=SHADOW_CODE, policy_version=decision.policy_version)
        ledger.transition(
            conn, intent, Event.POLICY_DENIED, now=now, actor=actor, move=move, detail=detail
        )
    return None


def _verdict_for(decision: Decision, intent: Intent) -> Verdict:
    action = dispatch_action(decision, intent.expires_at)
    return {"reschedule": Verdict.DEFER, "expire": Verdict.EXPIRE}.get(action, Verdict.SUPPRESS)


def _start_attempt(
    conn: Conn,
    intent: Intent,
    result: GateResult,
    request: ClaimRequest,
    now: datetime,
    actor: str,
    detail: dict[str, Any],
) -> Claimed:
    n = intent.attempt_count + 1
    key = attempt_key(intent.idempotency_key, n)
    move = ledger.Move(
        lease_owner=request.owner,
        lease_expires_at=now + timedelta(seconds=request.lease_seconds),
        attempts_added=1,
        decision_code=result.decision.code,
        policy_version=result.decision.policy_version,
    )
    detail = {**detail, "attempt": n}
    moved = ledger.transition(
        conn, intent, Event.CLAIM, now=now, actor=actor, move=move, detail=detail
    )
    execute(
        conn,
        "open_attempt",
        {
            "tenant_id": intent.tenant_id,
            "intent_id": intent.id,
            "n": n,
            "attempt_key": key,
            "channel": intent.channel,
            "provider": request.provider,
            "segments": None,
            "encoding": None,
            "now": now,
        },
    )
    return Claimed(moved, n, key, request.provider, result.policy)


def _shadow_scopes(conn: Conn, tenants: set[str]) -> set[tuple[str, str, str]]:
    if not tenants:
        return set()
    rows = fetch_all(conn, "shadow_controls", {"tenants": sorted(tenants)})
    return {(r["tenant_id"], r["channel"], r["country"]) for r in rows}


def _covered(intent: Intent, scopes: set[tuple[str, str, str]]) -> bool:
    country = intent.country or ""
    return any(
        (intent.tenant_id, channel, c) in scopes
        for channel in ("", intent.channel)
        for c in ("", country)
    )
