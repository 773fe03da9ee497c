"""The attempts table's one door: open, accept, settle and look up attempts.

An attempt is one provider call for an intent. Its row records facts (the
provider took it, a receipt said delivered) whatever happened to the intent
meanwhile, so these functions never look at the intent: callers move the
intent through `store/ledger`. Every write names the attempt states it may
move from (domain/attempts.py), so a late or repeated fact cannot move an
attempt backwards; the result says whether the row moved.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.intent import Attempt
from tidings.domain.keys import intent_of_attempt_key
from tidings.domain.states import AttemptState, IntentState
from tidings.store.database import Row, execute, fetch_all, fetch_one, records

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class AttemptRef:
    """Which attempt: the intent's tenant and id, and the attempt's number."""

    tenant_id: str
    intent_id: UUID
    n: int

    @classmethod
    def of(cls, attempt: Attempt) -> AttemptRef:
        return cls(attempt.tenant_id, attempt.intent_id, attempt.n)

    def params(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "intent_id": self.intent_id, "n": self.n}


@dataclass(frozen=True)
class Opening:
    """An attempt a claim starts, in state `sending`."""

    ref: AttemptRef
    attempt_key: str
    channel: str


@dataclass(frozen=True)
class Acceptance:
    """The provider took the call: its id for the message, what it cost,
    and when to look at its status first."""

    ref: AttemptRef
    provider_message_id: str
    next_check_at: datetime | None
    checks_expire_at: datetime | None
    segments: int | None = None
    encoding: str | None = None


@dataclass(frozen=True)
class Accepted:
    """An acceptance the attempt took (it was still sending or unknown)."""

    # Receipts for this provider id arrived before the id was known: they
    # wait, unmatched, for the caller to apply them.
    has_unmatched: bool


def open_many(conn: Conn, openings: Sequence[Opening], provider: str, now: datetime) -> None:
    """Insert the attempts a claim starts, in one statement."""
    rows = [
        {**o.ref.params(), "attempt_key": o.attempt_key, "channel": o.channel} for o in openings
    ]
    execute(conn, "open_attempts", {**records(rows), "provider": provider, "now": now})


def accept(
    conn: Conn,
    ref: AttemptRef,
    provider_message_id: str | None,
    now: datetime,
    *,
    next_check_at: datetime | None,
    checks_expire_at: datetime | None,
) -> Accepted | None:
    """The provider took the call; None when the attempt had moved past it."""
    row = fetch_one(
        conn,
        "attempt_accepted",
        {
            **ref.params(),
            "provider_message_id": provider_message_id,
            "now": now,
            "next_check_at": next_check_at,
            "checks_expire_at": checks_expire_at,
        },
    )
    return None if row is None else Accepted(bool(row["has_unmatched"]))


def accept_many(
    conn: Conn, acceptances: Sequence[Acceptance], now: datetime
) -> dict[AttemptRef, Accepted]:
    """`accept` for a batch, with the segments each message counted; the
    attempts that took their acceptance, by reference."""
    if not acceptances:
        return {}
    batch = [
        {
            **a.ref.params(),
            "provider_message_id": a.provider_message_id,
            "segments": a.segments,
            "encoding": a.encoding,
            "next_check_at": a.next_check_at,
            "checks_expire_at": a.checks_expire_at,
        }
        for a in acceptances
    ]
    rows = fetch_all(conn, "attempts_accepted", {**records(batch), "now": now})
    return {
        AttemptRef(r["tenant_id"], r["intent_id"], r["n"]): Accepted(bool(r["has_unmatched"]))
        for r in rows
    }


@dataclass(frozen=True)
class CallMark:
    """A call about to go out: its attempt, the intent version the claim
    holds, and whether the claim found its destination opted out or
    suppressed (a change since is a reason not to call)."""

    ref: AttemptRef
    version: int
    opted_out: bool = False
    suppressed: bool = False
    account: str = ""  # the provider account the call goes to


@dataclass(frozen=True)
class MarkResult:
    """What marking found: the claim still held, not killed, its recipient
    not stopped since the claim (an opt-out or suppression), and marked."""

    held: bool
    killed: bool
    marked: bool
    stopped: bool = False
    # Until when its provider account is paused (or its tenant held back on
    # it) by answers recorded since the claim; None: not paused.
    paused_until: datetime | None = None


def mark_calls_started(
    conn: Conn, marks: Sequence[CallMark], owner: str, now: datetime
) -> dict[AttemptRef, MarkResult]:
    """Write the durable "call started" mark for a group of calls, in one
    statement, and say which of them may go out (those marked)."""
    if not marks:
        return {}
    rows = [
        {
            **m.ref.params(),
            "version": m.version,
            "opted_out": m.opted_out,
            "suppressed": m.suppressed,
            "account": m.account,
        }
        for m in marks
    ]
    found = fetch_all(conn, "attempts_call_started", {**records(rows), "owner": owner, "now": now})
    return {
        AttemptRef(r["tenant_id"], r["intent_id"], r["n"]): MarkResult(
            bool(r["held"]),
            bool(r["killed"]),
            bool(r["marked"]),
            bool(r["stopped"]),
            r["paused_until"],
        )
        for r in found
    }


def lock_for_recovery(conn: Conn, ref: AttemptRef) -> Attempt | None:
    """The attempt, locked until the caller's transaction ends."""
    row = fetch_one(conn, "attempt_for_recovery", ref.params())
    return None if row is None else Attempt.from_row(row)


def withdraw_unstarted(conn: Conn, ref: AttemptRef) -> bool:
    """Remove an attempt whose call never started; whether it was one."""
    return fetch_one(conn, "attempt_unstarted_withdrawn", ref.params()) is not None


def record_segments(conn: Conn, ref: AttemptRef, segments: int, encoding: str | None) -> None:
    """What the message cost, a fact whatever state the attempt is in."""
    execute(conn, "attempt_segments", {**ref.params(), "segments": segments, "encoding": encoding})


def record_response_body(conn: Conn, ref: AttemptRef, body: str) -> None:
    """The provider's redacted, bounded answer to a send it did not accept."""
    execute(conn, "attempt_response_body", {**ref.params(), "response_body": body})


def settle(
    conn: Conn,
    ref: AttemptRef,
    state: AttemptState,
    *,
    code: str | None,
    now: datetime,
    from_states: Collection[AttemptState],
    next_check_at: datetime | None = None,
    checks_expire_at: datetime | None = None,
    provider_message_id: str | None = None,
) -> bool:
    """Move the attempt to `state` if it is in one of `from_states`; whether it moved.

    `next_check_at` is when to look its status up next (None: never);
    `checks_expire_at` None keeps the budget it has; `provider_message_id`
    is recorded if the attempt had none.
    """
    row = fetch_one(
        conn,
        "attempt_settled",
        {
            **ref.params(),
            "state": state.value,
            "code": code,
            "now": now,
            "next_check_at": next_check_at,
            "checks_expire_at": checks_expire_at,
            "provider_message_id": provider_message_id,
            "from_states": sorted(s.value for s in from_states),
        },
    )
    return row is not None


@dataclass(frozen=True)
class DueCheck:
    """An attempt whose status is due for a look, with its intent's state."""

    attempt: Attempt
    intent_state: IntentState
    destination_hash: str | None = None


def lease_due_checks(
    conn: Conn, now: datetime, limit: int, lease_until: datetime
) -> list[DueCheck]:
    """The attempts due for a status check, each leased until `lease_until`
    (in the same statement) so other workers leave it alone while this one
    looks it up. Each comes as it was before the lease: the schedule counts
    from its check count before this check."""
    rows = fetch_all(conn, "due_checks", {"now": now, "limit": limit, "lease_until": lease_until})
    return [
        DueCheck(Attempt.from_row(r), IntentState(r["intent_state"]), r["intent_destination_hash"])
        for r in rows
    ]


def reschedule_check(
    conn: Conn, ref: AttemptRef, at: datetime, *, checks_done: int | None = None
) -> None:
    """The next check at `at`; `checks_done` counts the checks of the budget
    as spent up to there (None: as they are)."""
    execute(
        conn,
        "reschedule_check",
        {**ref.params(), "next_check_at": at, "checks_done": checks_done},
    )


def by_number(conn: Conn, ref: AttemptRef) -> Attempt | None:
    row = fetch_one(conn, "attempt_by_number", ref.params())
    return None if row is None else Attempt.from_row(row)


def by_reference(conn: Conn, attempt_key: str, provider: str) -> list[Row]:
    """At most two attempts sent through `provider` under our reference."""
    params = {"attempt_key": attempt_key, "provider": provider}
    intent_id = intent_of_attempt_key(attempt_key)
    if intent_id is None:
        return fetch_all(conn, "attempts_by_reference", params)
    return fetch_all(conn, "attempts_by_reference_of_intent", {**params, "intent_id": intent_id})


def by_provider_id(conn: Conn, provider: str, provider_message_id: str) -> list[Row]:
    """At most two attempts the provider (account) knows by this id."""
    return fetch_all(
        conn,
        "attempts_by_provider_id",
        {"provider": provider, "provider_message_id": provider_message_id},
    )


def reached_provider(conn: Conn, tenant_id: str, intent_id: UUID) -> int:
    """How many of the intent's attempts the provider had: what a resend budget counts."""
    row = fetch_one(
        conn, "attempts_reached_provider", {"tenant_id": tenant_id, "intent_id": intent_id}
    )
    return int(row["n"]) if row else 1


def open_calls_to(
    conn: Conn,
    attempt: Attempt,
    destination_hash: str,
    since: datetime,
    until: datetime,
) -> int:
    """Other started calls to this destination through the attempt's provider
    account, in [since, until], whose provider id is not known yet."""
    row = fetch_one(
        conn,
        "open_calls_to_destination",
        {
            **AttemptRef.of(attempt).params(),
            "provider": attempt.provider,
            "channel": attempt.channel,
            "destination_hash": destination_hash,
            "since": since,
            "until": until,
        },
    )
    return int(row["n"]) if row else 0


def quarantine_sending(conn: psycopg.Connection[Any], params: dict[str, Any]) -> bool:
    """Park a `sending` intent and its open attempt as `unknown` with a code
    (attempts.sql says why); False if the intent was no longer `sending`."""
    return fetch_one(conn, "quarantine_sending", params) is not None
