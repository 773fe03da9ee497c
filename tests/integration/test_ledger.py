from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tidings import (
    AlreadyTerminal,
    IdempotencyConflict,
    IntentState,
    InvalidInput,
    ManualClock,
    NotFound,
    StaleTransition,
    Tidings,
)
from tidings.domain.transitions import Event, InvalidTransition
from tidings.store import ledger

from .dispatch_helpers import publish_offer_template

# Also run on the embedded PostgreSQL in CI, beside the smoke processes tests
# (tests/lanes.py).
pytestmark = pytest.mark.smoke


@pytest.fixture(autouse=True)
def offer_template(tidings: Tidings) -> None:
    publish_offer_template(tidings)


def offer(clock: ManualClock, **overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "idempotency_key": "waitlist:771:1842:offer:1",
        "channel": "sms",
        "recipient": {
            "ref": "member-1842",
            "phone": "+14155550123",
            "timezone": "America/New_York",
        },
        "template": "waitlist_offer",
        "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
        "purpose": "transactional",
        "event_class": "waitlist_offer",
        "expires_at": clock.now() + timedelta(minutes=30),
    }
    request.update(overrides)
    return request


def count(db_url: str, table: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


def test_notify_creates_a_pending_intent_with_its_ledger_timestamps(
    tidings: Tidings, clock: ManualClock
) -> None:
    intent = tidings.notify(**offer(clock))
    assert intent.state is IntentState.PENDING
    assert intent.version == 1
    assert intent.created_at == clock.now()
    assert (
        intent.accepted_at is None and intent.last_status_at is None and intent.terminal_at is None
    )
    assert intent.country == "US"
    assert tidings.get(intent.id).idempotency_key == "waitlist:771:1842:offer:1"


def test_same_key_and_body_returns_the_first_intent(tidings: Tidings, clock: ManualClock) -> None:
    first = tidings.notify(**offer(clock))
    clock.advance(5)
    again = tidings.notify(**offer(clock, expires_at=first.expires_at))
    assert again.id == first.id and again.version == first.version


def test_same_key_with_another_body_is_a_conflict(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    tidings.notify(**offer(clock))
    with pytest.raises(IdempotencyConflict):
        tidings.notify(**offer(clock, variables={"class_name": "Yoga", "deadline": "18:00"}))
    assert count(db_url, "intents") == 1


def test_a_key_reused_for_another_recipient_stores_nothing_of_it(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    # The key's arbiter index decides, in the insert itself: the second
    # request's destination must not be stored beside an intent that is
    # not its own.
    tidings.notify(**offer(clock))
    other = {"ref": "member-9", "phone": "+14155550999"}
    with pytest.raises(IdempotencyConflict):
        tidings.notify(**offer(clock, recipient=other))
    assert count(db_url, "destinations") == 1
    assert count(db_url, "transitions") == 1


def test_a_used_key_is_a_conflict_before_its_template_is_checked(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    tidings.notify(**offer(clock))
    with pytest.raises(IdempotencyConflict):
        tidings.notify(**offer(clock, template="no_such_template"))
    with pytest.raises(InvalidInput, match="no sms template named"):
        tidings.notify(**offer(clock, idempotency_key="fresh", template="no_such_template"))
    assert count(db_url, "intents") == 1


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"recipient": {"ref": "m", "phone": "+1 415 555"}}, "recipient.phone"),
        ({"recipient": {"ref": "m", "phone": "0415550123"}}, "recipient.phone"),
        ({"channel": "pigeon"}, "channel"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": None}, "idempotency_key"),
        ({"recipient": {"ref": "m", "email": "x@example.com"}}, "recipient.phone"),
        (
            {"channel": "email", "recipient": {"ref": "m", "email": "not-an-address"}},
            "recipient.email",
        ),
        ({"recipient": {"phone": "+14155550123"}}, "recipient.ref"),
        (
            {"recipient": {"ref": "m", "phone": "+14155550123", "timezone": "Mars/Olympus"}},
            "recipient.timezone",
        ),
        ({"purpose": ""}, "purpose"),
        ({"template": {"name": "x", "revision": 0}}, "template.revision"),
        ({"variables": {"x": object()}}, "variables"),
    ],
)
def test_bad_input_is_refused_and_creates_nothing(
    tidings: Tidings, clock: ManualClock, db_url: str, overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as error:
        tidings.notify(**offer(clock, **overrides))
    assert error.value.field == field
    assert count(db_url, "intents") == 0
    assert count(db_url, "destinations") == 0


def test_an_expiry_in_the_past_is_refused(tidings: Tidings, clock: ManualClock) -> None:
    with pytest.raises(InvalidInput, match="past"):
        tidings.notify(**offer(clock, expires_at=clock.now() - timedelta(seconds=1)))


def test_notify_joins_the_callers_transaction(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("CREATE TABLE waitlist (member text)")
        conn.commit()
        conn.execute("INSERT INTO waitlist VALUES ('1842')")
        tidings.notify(**offer(clock), conn=conn)
        conn.rollback()
    assert count(db_url, "intents") == 0
    assert count(db_url, "transitions") == 0
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO waitlist VALUES ('1842')")
        intent = tidings.notify(**offer(clock), conn=conn)
        conn.commit()
    assert tidings.get(intent.id).state is IntentState.PENDING


def test_eight_threads_creating_the_same_intent_make_one(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    barrier = threading.Barrier(8)
    ids: list[Any] = []
    errors: list[BaseException] = []

    def create() -> None:
        try:
            barrier.wait()
            ids.append(tidings.notify(**offer(clock)).id)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(ids)) == 1
    assert count(db_url, "intents") == 1
    assert count(db_url, "transitions") == 1


def test_destination_is_stored_once_encrypted(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    tidings.notify(**offer(clock))
    tidings.notify(**offer(clock, idempotency_key="waitlist:771:1842:offer:2"))
    with psycopg.connect(db_url) as conn:
        dump = conn.execute(
            "SELECT string_agg(t::text, ' ') FROM (SELECT * FROM intents) t"
        ).fetchone()
        rows = conn.execute("SELECT ciphertext FROM destinations").fetchall()
    assert len(rows) == 1
    assert "4155550123" not in str(dump) and b"4155550123" not in bytes(rows[0][0])
    assert tidings.vault.decrypt(rows[0][0]) == "+14155550123"


def test_cancel_records_reason_event_and_audit(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    intent = tidings.notify(**offer(clock))
    clock.advance(60)
    canceled = tidings.cancel(intent.id, reason="member_left")
    assert canceled.state is IntentState.CANCELED
    assert canceled.version == 2
    assert canceled.cancel_reason == "member_left"
    assert canceled.terminal_at == clock.now()
    entries = tidings.timeline(intent.id)
    assert [(e.from_state, e.to_state, e.event) for e in entries] == [
        (None, "pending", "create"),
        ("pending", "canceled", "cancel"),
    ]
    with psycopg.connect(db_url) as conn:
        types = [r[0] for r in conn.execute("SELECT type FROM events")]
    assert types == ["intent.canceled"]


def test_cancel_of_a_finished_intent_is_a_conflict(tidings: Tidings, clock: ManualClock) -> None:
    intent = tidings.notify(**offer(clock))
    tidings.cancel(intent.id, reason="class_canceled")
    with pytest.raises(AlreadyTerminal) as error:
        tidings.cancel(intent.id, reason="member_left")
    assert error.value.state == "canceled"


def test_cancel_reason_must_be_known(tidings: Tidings, clock: ManualClock) -> None:
    intent = tidings.notify(**offer(clock))
    with pytest.raises(InvalidInput):
        tidings.cancel(intent.id, reason="bored")
    assert tidings.get(intent.id).state is IntentState.PENDING


def test_unknown_intent_is_not_found(tidings: Tidings) -> None:
    with pytest.raises(NotFound):
        tidings.get("01a228d2-af1a-71eb-b359-2ed0ae75ea16")
    with pytest.raises(NotFound):
        tidings.get("not-a-uuid")


def claim(conn: psycopg.Connection[Any], tidings: Tidings, intent: Any) -> Any:
    move = ledger.Move(
        lease_owner="worker-a",
        lease_expires_at=tidings.clock.now() + timedelta(seconds=30),
        attempts_added=1,
    )
    return ledger.transition(
        conn, intent, Event.CLAIM, now=tidings.clock.now(), actor="worker:a", move=move
    )


def test_cancel_committed_first_makes_the_claim_stale(tidings: Tidings, clock: ManualClock) -> None:
    created = tidings.notify(**offer(clock))
    with tidings.db.pool.connection() as worker:
        seen = ledger.get_intent(worker, tidings.tenant, created.id)  # worker reads version 1
        worker.commit()
        tidings.cancel(created.id, reason="member_left")  # version 2 commits
        with pytest.raises(StaleTransition):
            claim(worker, tidings, seen)
        worker.rollback()
    final = tidings.get(created.id)
    assert final.state is IntentState.CANCELED and final.attempt_count == 0


def test_cancel_waiting_on_an_uncommitted_claim_cancels_after_it(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    created = tidings.notify(**offer(clock))
    with tidings.db.pool.connection() as worker:
        claimed = claim(worker, tidings, created)  # version 2, not committed: row locked
        done = threading.Event()
        result: list[Any] = []
        canceller = threading.Thread(
            target=lambda: (
                result.append(tidings.cancel(created.id, reason="member_left")),
                done.set(),
            )
        )
        canceller.start()
        _wait_until_blocked(db_url)
        assert not done.is_set()
        worker.commit()
        canceller.join(10)
        # The worker still holds version 2: its next move must find nothing.
        with pytest.raises(StaleTransition):
            ledger.transition(
                worker, claimed, Event.PROVIDER_ACCEPTED, now=clock.now(), actor="worker:a"
            )
        worker.rollback()
    assert result[0].state is IntentState.CANCELED and result[0].version == 3
    assert [e.to_state for e in tidings.timeline(created.id)] == ["pending", "sending", "canceled"]


def test_the_timeline_lists_the_intents_moves_in_version_order_whatever_their_times(
    tidings: Tidings, clock: ManualClock
) -> None:
    # A cancel reads its time before it waits for a worker's claim to
    # commit: its transition (version 3) can carry an earlier time than the
    # claim's (version 2). The timeline tells the story in the order the
    # intent lived it.
    created = tidings.notify(**offer(clock))
    clock.advance(2)
    with tidings.db.transaction() as worker:
        claim(worker, tidings, tidings.get(created.id))
    clock.advance(-1)
    tidings.cancel(created.id, reason="member_left")
    entries = [e for e in tidings.timeline(created.id) if e.kind == "transition"]
    assert [e.detail["version"] for e in entries] == [1, 2, 3]
    assert [e.to_state for e in entries] == ["pending", "sending", "canceled"]
    assert entries[2].at < entries[1].at  # each move keeps its own time


def _wait_until_blocked(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        for _ in range(500):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            ).fetchone()
            if row and row[0] > 0:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("the cancel never waited on the worker's lock")


def test_the_table_refuses_moves_it_does_not_list(tidings: Tidings, clock: ManualClock) -> None:
    intent = tidings.notify(**offer(clock))
    with tidings.db.transaction() as conn, pytest.raises(InvalidTransition):
        ledger.transition(conn, intent, Event.DELIVERED, now=clock.now(), actor="test")


def test_a_lease_is_held_only_while_sending(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    intent = tidings.notify(**offer(clock))
    with tidings.db.transaction() as conn:
        sending = claim(conn, tidings, intent)
        assert sending.lease_owner == "worker-a" and sending.next_due_at is None
        accepted = ledger.transition(
            conn, sending, Event.PROVIDER_ACCEPTED, now=clock.now(), actor="w"
        )
    assert accepted.lease_owner is None and accepted.lease_expires_at is None
    assert accepted.accepted_at == clock.now()
    with psycopg.connect(db_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("UPDATE intents SET state = 'sending'")
