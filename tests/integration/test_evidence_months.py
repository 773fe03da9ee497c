"""Partitioned evidence (#26 item 4): attempts, transitions, events and
observations live in one partition per month of their intent's creation,
made ahead of time; retention drops a month whole once every intent of it
is past its own policy's clock, and takes the rest row by row only where a
month must stay. The injected clock is set inside the months the migration
made, and walked to an hour before and after each boundary."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tidings import ManualClock, Tidings
from tidings.dispatch.observe import apply_observation, rematch
from tidings.dispatch.retention import purge
from tidings.domain.evidence_months import TABLES, Month
from tidings.policies import builtin_document
from tidings.providers.outcomes import Observation, ObservedStatus
from tidings.store import evidence_partitions, job_counts

from ..conftest import publish_example_policy
from .dispatch_helpers import offer, publish_offer_template, simulator, worker

HOUR = timedelta(hours=1)


def first_month(db_url: str) -> Month:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT min(month) FROM evidence_months").fetchone()
    assert row is not None and row[0] is not None, "migrate() made no months"
    return Month.of(row[0])


@pytest.fixture
def clock(db_url: str) -> ManualClock:
    """Noon on the 3rd of the first month the migration made."""
    return ManualClock(first_month(db_url).starts_at + timedelta(days=2, hours=12))


def partitions(db_url: str, intent_id: Any) -> dict[str, set[str]]:
    """Which partition of each evidence table holds the intent's rows."""
    found: dict[str, set[str]] = {}
    with psycopg.connect(db_url) as conn:
        for table in TABLES:
            rows = conn.execute(
                f"SELECT DISTINCT tableoid::regclass::text FROM {table} WHERE intent_id = %s",
                (intent_id,),
            ).fetchall()
            found[table] = {r[0] for r in rows}
    return found


def exists(db_url: str, table: str) -> bool:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row and row[0])


def count(db_url: str, table: str, intent_id: Any) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table} WHERE intent_id = %s", (intent_id,))
        return int(row.fetchone()[0])  # type: ignore[index]


def dropped(removed: dict[str, Any], month: Month) -> list[str]:
    """What went of `month` (months with nothing in them go as well)."""
    return [d for d in removed["months_dropped"] if d.startswith(f"{month}:")]


def delivered(tidings: Tidings, clock: ManualClock, n: int) -> Any:
    w = worker(tidings, simulator(clock))
    intent = offer(tidings, n)
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    done = tidings.get(intent.id)
    assert done.state.value == "delivered"
    return done


def delivered_receipt(provider_message_id: str, dedupe_key: str, at: datetime) -> Observation:
    """A delivery receipt that names no attempt key, as most providers' do."""
    return Observation(
        provider="simulator",
        provider_message_id=provider_message_id,
        attempt_key=None,
        status=ObservedStatus.delivered,
        code=None,
        raw_status="delivered",
        occurred_at=at,
        dedupe_key=dedupe_key,
        raw={},
    )


def test_months_are_made_ahead_and_hold_their_intents_evidence(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    month = Month.of(clock.now())
    with tidings.db.transaction() as conn:
        made = [m.month for m in evidence_partitions.registered(conn)]
    assert made == [month, month.plus(1)]
    publish_offer_template(tidings)
    intent = delivered(tidings, clock, 1)
    assert partitions(db_url, intent.id) == {t: {month.partition(t)} for t in TABLES}
    assert tidings.migrate() == []  # nothing new: the months are there
    with tidings.db.transaction() as conn:
        assert len(evidence_partitions.registered(conn)) == 2
    later = month.plus(2).starts_at
    assert evidence_partitions.ensure(tidings.db, later) == [month.plus(2), month.plus(3)]


def test_evidence_written_before_its_month_existed_moves_into_it(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    beyond = first_month(db_url).plus(6)  # past the months made ahead
    clock.set(beyond.starts_at + timedelta(days=1, hours=12))
    publish_offer_template(tidings)
    intent = delivered(tidings, clock, 1)
    assert partitions(db_url, intent.id) == {t: {f"{t}_default"} for t in TABLES}
    timeline = [(e.kind, e.event, e.to_state) for e in tidings.timeline(intent.id)]
    made = evidence_partitions.ensure(tidings.db, clock.now())
    assert made[-1] == beyond.plus(1) and beyond in made
    assert partitions(db_url, intent.id) == {t: {beyond.partition(t)} for t in TABLES}
    assert [(e.kind, e.event, e.to_state) for e in tidings.timeline(intent.id)] == timeline
    # Ids go on: the next transition of another intent gets a fresh one.
    assert delivered(tidings, clock, 2).state.value == "delivered"


def test_a_month_goes_whole_once_every_intent_is_past_its_clock(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    month = Month.of(clock.now())
    first, second = delivered(tidings, clock, 1), delivered(tidings, clock, 2)
    clock.set(month.plus(1).starts_at + timedelta(days=2))
    next_month = delivered(tidings, clock, 3)

    clock.set(month.ends_at + timedelta(days=90) - HOUR)
    assert purge(tidings.db, clock.now())["months_dropped"] == []
    assert exists(db_url, month.partition("observations"))
    clock.set(month.ends_at + timedelta(days=90) + HOUR)
    removed = purge(tidings.db, clock.now())
    assert removed["months_dropped"] == [f"{month}: observations"]  # the next one is younger
    assert removed["observations"] == 0  # none deleted row by row
    assert not exists(db_url, month.partition("observations"))
    assert count(db_url, "attempts", first.id) == 1  # its own clock
    assert count(db_url, "observations", next_month.id) > 0  # another month

    clock.set(month.ends_at + timedelta(days=180) - HOUR)
    purge(tidings.db, clock.now())
    assert all(exists(db_url, month.partition(t)) for t in ("attempts", "transitions", "events"))
    clock.set(month.ends_at + timedelta(days=180) + HOUR)
    removed = purge(tidings.db, clock.now())
    assert dropped(removed, month) == [f"{month}: attempts, transitions, events"]
    assert removed["attempts"] == 0
    assert not any(exists(db_url, month.partition(t)) for t in TABLES)
    for intent in (first, second):
        kept = tidings.get(intent.id)  # the recipient decision stays
        assert (kept.state.value, kept.decision_code) == ("delivered", intent.decision_code)
        [note] = [e for e in tidings.timeline(intent.id) if e.kind == "retention"]
        assert note.event == "attempt_evidence_purged" and note.at == clock.now()
    assert count(db_url, "attempts", next_month.id) == 1
    assert not [e for e in tidings.timeline(next_month.id) if e.kind == "retention"]
    with tidings.db.transaction() as conn:
        [row] = [m for m in evidence_partitions.registered(conn) if m.month == month]
    assert row.attempts_dropped_at == clock.now()


def test_a_month_past_every_clock_goes_and_the_few_it_still_needs_move_apart(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    month = Month.of(clock.now())
    done = delivered(tidings, clock, 1)
    waiting = offer(tidings, 2, not_before=clock.now() + timedelta(days=300), expires_at=None)
    ended = done.terminal_at

    # Its own clock has run, the month's has not: it waits for the month.
    clock.set(ended + timedelta(days=180) + HOUR)
    assert clock.now() < month.ends_at + timedelta(days=180)
    purge(tidings.db, clock.now())
    assert count(db_url, "attempts", done.id) == 1

    clock.set(month.ends_at + timedelta(days=180) + HOUR)
    removed = purge(tidings.db, clock.now())
    # `waiting` is not final: its rows move to the default partitions, and
    # the month goes whole with `done`'s (none deleted row by row).
    assert f"{month}: attempts, transitions, events (1 intents' kept)" in dropped(removed, month)
    assert removed["attempts"] == 0
    assert not exists(db_url, month.partition("attempts"))
    assert count(db_url, "transitions", done.id) == 0
    assert partitions(db_url, waiting.id)["transitions"] == {"transitions_default"}
    [note] = [e for e in tidings.timeline(done.id) if e.kind == "retention"]
    assert note.at == clock.now()
    assert not [e for e in tidings.timeline(waiting.id) if e.kind == "retention"]

    tidings.cancel(waiting.id, reason="member_left")  # its new rows join the others
    canceled_at = clock.now()
    assert count(db_url, "transitions", waiting.id) == 2
    clock.set(canceled_at + timedelta(days=180) - HOUR)
    purge(tidings.db, clock.now())
    assert count(db_url, "transitions", waiting.id) == 2
    clock.set(canceled_at + timedelta(days=180) + HOUR)
    assert purge(tidings.db, clock.now())["attempts"] == 0  # it had none
    assert count(db_url, "transitions", waiting.id) == 0


def test_a_month_many_intents_still_need_stays_and_the_rest_goes_row_by_row(
    tidings: Tidings, clock: ManualClock, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidings.dispatch import retention_months

    monkeypatch.setattr(retention_months, "MOST_KEPT", 1)
    publish_offer_template(tidings)
    month = Month.of(clock.now())
    done = delivered(tidings, clock, 1)
    later = clock.now() + timedelta(days=300)
    waiting = [offer(tidings, n, not_before=later, expires_at=None) for n in (2, 3)]

    clock.set(month.ends_at + timedelta(days=180) + HOUR)
    removed = purge(tidings.db, clock.now())
    assert [d for d in dropped(removed, month) if "attempts" in d] == []
    assert removed["attempts"] == 1  # `done`'s, row by row, now the month is overdue
    assert count(db_url, "transitions", done.id) == 0
    assert all(count(db_url, "transitions", w.id) == 1 for w in waiting)
    assert exists(db_url, month.partition("attempts"))
    [note] = [e for e in tidings.timeline(done.id) if e.kind == "retention"]
    assert note.at == clock.now()  # the row-by-row one


def test_a_month_waits_for_the_longest_clock_of_the_policies_in_it(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    month = Month.of(clock.now())
    long_kept = delivered(tidings, clock, 1)
    doc = copy.deepcopy(builtin_document("default"))
    doc["version"] = "thirty-day-evidence"
    doc["retention"] = {**doc["retention"], "attempt_evidence_days": 30}
    tidings.publish_policy(doc)
    short_kept = delivered(tidings, clock, 2)
    assert short_kept.policy_version == "thirty-day-evidence"

    clock.set(month.ends_at + timedelta(days=30) + HOUR)
    removed = purge(tidings.db, clock.now())
    assert dropped(removed, month) == [] and removed["attempts"] == 1
    assert count(db_url, "attempts", short_kept.id) == 0
    assert count(db_url, "attempts", long_kept.id) == 1

    clock.set(month.ends_at + timedelta(days=180) + HOUR)
    removed = purge(tidings.db, clock.now())
    assert f"{month}: attempts, transitions, events" in dropped(removed, month)
    assert not exists(db_url, month.partition("attempts"))


def test_a_busy_table_is_not_waited_for(tidings: Tidings, clock: ManualClock, db_url: str) -> None:
    """A drop waits at most half a second for the statements on a table, and
    holds up those behind it no longer: a long read makes it try next time."""
    publish_offer_template(tidings)
    month = Month.of(clock.now())
    delivered(tidings, clock, 1)
    clock.set(month.ends_at + timedelta(days=180) + HOUR)
    reading, release = threading.Event(), threading.Event()

    def long_read() -> None:
        with psycopg.connect(db_url) as conn:
            conn.execute("SELECT count(*) FROM attempts").fetchone()
            reading.set()
            release.wait(30)

    reader = threading.Thread(target=long_read)
    reader.start()
    try:
        assert reading.wait(10)
        removed = purge(tidings.db, clock.now())
        assert dropped(removed, month) == [f"{month}: observations"]
        assert exists(db_url, month.partition("attempts"))
        # The other work went on meanwhile: a new intent is created and sent.
        assert delivered(tidings, clock, 2).state.value == "delivered"
    finally:
        release.set()
        reader.join()
    removed = purge(tidings.db, clock.now())
    assert dropped(removed, month) == [f"{month}: attempts, transitions, events"]


def test_a_receipt_kept_unmatched_joins_its_intents_month_once_matched(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    month = Month.of(clock.now())
    intent = delivered(tidings, clock, 1)
    [attempt] = [e for e in tidings.timeline(intent.id) if e.kind == "attempt"]
    sid = attempt.detail["provider_message_id"]
    receipt = delivered_receipt("SM-later", "early:1", clock.now())
    with tidings.db.transaction() as conn:
        assert apply_observation(conn, receipt, "webhook", clock.now()) == "unmatched"
        assert apply_observation(conn, receipt, "webhook", clock.now()) == "duplicate"
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE attempts SET provider_message_id = 'SM-later' WHERE provider_message_id = %s",
            (sid,),
        )
    # A second copy lands once the attempt is known, before the first is matched.
    with tidings.db.transaction() as conn:
        assert apply_observation(conn, receipt, "webhook", clock.now()) != "unmatched"
        assert rematch(conn, "simulator", "SM-later", clock.now()) == 1
    with psycopg.connect(db_url) as conn:
        stored = conn.execute(
            "SELECT tableoid::regclass::text FROM observations WHERE dedupe_key = 'early:1'"
        ).fetchall()
        waiting = conn.execute("SELECT count(*) FROM unmatched_observations").fetchone()
    assert stored == [(month.partition("observations"),)] and waiting == (0,)


def test_made_months_start_where_old_evidence_starts(fresh_db: str) -> None:
    """An install upgraded with evidence from before 0026: its months start
    at the oldest month of evidence, which moves out of the default partition."""
    from tidings.store.migrate import migrate

    migrate(fresh_db)
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        made = [Month.of(r[0]) for r in conn.execute("SELECT month FROM evidence_months")]
        assert made[0] == Month.of(datetime.now(UTC))
        # As before 0026: no months, every row in the default partitions.
        for month in made:
            for table in TABLES:
                conn.execute("SELECT evidence_month_drop(%s, %s, '{}')", (table, month.first_day))
        conn.execute("DELETE FROM evidence_months")
    old = Month.of(datetime.now(UTC)).plus(-5)
    with Tidings(fresh_db, clock=ManualClock(old.starts_at + timedelta(hours=12))) as t:
        publish_example_policy(t)
        publish_offer_template(t)
        intent = offer(t, 1)
    assert partitions(fresh_db, intent.id)["transitions"] == {"transitions_default"}
    migrate(fresh_db)
    assert partitions(fresh_db, intent.id)["transitions"] == {old.partition("transitions")}
    with psycopg.connect(fresh_db) as conn:
        months = [Month.of(r[0]) for r in conn.execute("SELECT month FROM evidence_months")]
    now = Month.of(datetime.now(UTC))
    assert months == [old.plus(i) for i in range(5 + 2)] and months[-1] == now.plus(1)


def test_a_late_receipt_for_a_dropped_month_goes_at_its_own_clock(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    month = Month.of(clock.now())
    intent = delivered(tidings, clock, 1)
    clock.set(month.ends_at + timedelta(days=90) + HOUR)
    assert dropped(purge(tidings.db, clock.now()), month) == [f"{month}: observations"]
    [attempt] = [e for e in tidings.timeline(intent.id) if e.kind == "attempt"]
    late = delivered_receipt(attempt.detail["provider_message_id"], "late:1", clock.now())
    with tidings.db.transaction() as conn:
        assert apply_observation(conn, late, "webhook", clock.now()) == "no_change"
    received = clock.now()
    assert partitions(db_url, intent.id)["observations"] == {"observations_default"}
    clock.set(received + timedelta(days=90) - HOUR)
    purge(tidings.db, clock.now())
    assert count(db_url, "observations", intent.id) == 1
    clock.set(received + timedelta(days=90) + HOUR)
    assert purge(tidings.db, clock.now())["observations"] == 1
    assert count(db_url, "observations", intent.id) == 0


def test_moving_a_months_kept_rows_apart_counts_nothing_twice(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    # A month that goes whole moves the rows still needed to the default
    # partitions by inserting them again: the count triggers must not see
    # those inserts as new attempts, receipts or bytes.
    publish_offer_template(tidings)
    tidings.publish_template("waitlist_offer", channel="email", subject="Offer", body="Offer")
    job_id = tidings.create_job(
        idempotency_key="moved",
        event_class="waitlist_offer",
        purpose="transactional",
        template="waitlist_offer",
        channels=["email"],
        audience=[{"ref": f"m-{i}", "email": f"m{i}@example.com"} for i in range(3)],
        variables={"class_name": "Spin", "deadline": "18:00"},
    )["id"]
    tidings.prepare_jobs()
    w = worker(tidings, simulator(clock))
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()

    def kept() -> list[Any]:
        with tidings.db.transaction() as conn:
            return sorted(
                (tuple(r.values()) for r in job_counts.of_job(conn, tidings.tenant, job_id)),
                key=repr,
            )

    before = kept()
    assert any(r[4] for r in before), before  # attempts were counted
    month = Month.of(clock.now())
    with psycopg.connect(db_url) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM intents WHERE job_id = %s", (job_id,))]
        for table in ("attempts", "transitions", "observations"):
            moved = conn.execute(
                "SELECT evidence_month_drop(%s, %s, %s)", (table, month.starts_at.date(), ids)
            ).fetchone()
            assert moved is not None and moved[0] > 0, table
    assert partitions(db_url, ids[0])["attempts"] == {"attempts_default"}
    assert [r[:-1] for r in kept()] == [r[:-1] for r in before]
