"""Issue #39: one tenant's policy or row stops no shared loop for anyone else.

The publish checks now refuse every number past its limit
(test_policy_bounds.py), so here the hostile documents are planted
directly in the database, around the checks, as an old release or a bad
restore leaves them; so is an intent or a job naming a policy version
that is not stored. Each shared loop (lease recovery, the claim, job
preparation, alert evaluation, the purge) quarantines the hostile row
with a code and an alert naming its tenant, and the victim's work goes
on. The last test does it with the real processes (`tidings worker` and
the simulator), as the finding was made.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from harness.processes import ledger, start_worker, wait_until
from harness.processes import simulator as simulator_process

from tests.conftest import TEST_SECRET, publish_example_policy
from tests.integration.dispatch_helpers import offer, publish_offer_template, simulator
from tests.integration.dispatch_helpers import worker as make_worker
from tests.integration.observability_helpers import evaluate_alerts
from tests.security.webhook_receivers import (
    ALLOW_PRIVATE,
    SECRET,
    canceled_offers,
    push_until,
    ready_tenant,
    receiver,
)
from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.record import Sent, record_results
from tidings.dispatch.retention import purge
from tidings.policies import builtin_document
from tidings.providers.outcomes import Accepted

HOSTILE, VICTIM = "hostile", "victim"
MISSING = "no-such-version"

# The numbers, each under its own planted version.
PLANTED: dict[str, tuple[str, Any]] = {
    "give-up-1e12": ("poll_schedule.give_up_after_seconds", 1e12),
    "budget-1e30": ("resend_budget", 10**30),
    "budget-2e31": ("resend_budget", 2**31),
    "evidence-1e12": ("retention.attempt_evidence_days", 10**12),
    "pending-1e300": ("retry.max_pending_seconds", 1e300),
}


def plant_policy(db_url: str, tenant: str, version: str) -> str:
    """A stored policy version past a limit, written around every check."""
    path, value = PLANTED[version]
    doc = copy.deepcopy(builtin_document("default"))
    doc["version"] = version
    target: Any = doc
    *parents, last = path.split(".")
    for key in parents:
        target = target[key]
    target[last] = value
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO policies (tenant_id, version, name, document, published_at, published_by)"
            " VALUES (%s, %s, 'planted', %s::jsonb, '2020-01-01', 'planted')",
            [tenant, version, json.dumps(doc)],
        )
    return version


def point(db_url: str, table: str, ids: list[UUID], version: str) -> None:
    """Make rows name another policy version (test-only SQL over fixed names)."""
    with psycopg.connect(db_url) as conn:
        conn.execute(f"UPDATE {table} SET policy_version = %s WHERE id = ANY(%s)", [version, ids])


def intent_row(db_url: str, intent_id: UUID) -> tuple[str, str | None]:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT state, decision_code FROM intents WHERE id = %s", [intent_id]
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def quarantined_alerts(t: Tidings, clock: ManualClock) -> list[tuple[str, str]]:
    return [
        (a.tenant_id, a.severity)
        for a in evaluate_alerts(t.db, clock.now())
        if a.condition == "quarantined"
    ]


def two_tenants(t: Tidings) -> tuple[Tidings, Tidings]:
    hostile, victim = t.for_tenant(HOSTILE), t.for_tenant(VICTIM)
    for tenant in (hostile, victim):
        publish_example_policy(tenant)
        publish_offer_template(tenant)
    return hostile, victim


@pytest.mark.parametrize("version", [MISSING, "give-up-1e12"])
def test_lease_recovery_quarantines_the_hostile_intent_and_recovers_the_rest(
    tidings: Tidings, db_url: str, clock: ManualClock, version: str
) -> None:
    """Finding 1: already-sent intents of another tenant stayed `sending`
    with expired leases while `recover_leases` crashed every round."""
    hostile, victim = two_tenants(tidings)
    victims = [offer(victim, n).id for n in (1, 2)]
    bad = offer(hostile, 3).id
    w = make_worker(tidings, simulator(clock), lease_seconds=30)
    for claimed in w.claim("sms", 10):
        w._starts.verdict(claimed)  # the call started, then the worker died
    if version != MISSING:
        plant_policy(db_url, HOSTILE, version)
    point(db_url, "intents", [bad], version)
    clock.advance(31)

    assert w.sweep_once()["leases_recovered"] == 3

    for intent_id in victims:
        got = victim.get(intent_id)
        assert got.state is IntentState.RECONCILING
        assert [(a.state, a.code) for a in got.attempts] == [("unknown", "LEASE_EXPIRED")]
    # Its call may have gone out: never resent, unknown and visible.
    assert intent_row(db_url, bad) == ("unknown", "POLICY_UNREADABLE")
    with psycopg.connect(db_url) as conn:
        audit = conn.execute(
            "SELECT from_state, to_state, event FROM transitions WHERE intent_id = %s"
            " ORDER BY version DESC LIMIT 1",
            [bad],
        ).fetchone()
    assert audit == ("sending", "unknown", "quarantined")
    assert quarantined_alerts(tidings, clock) == [(HOSTILE, "warning")]
    assert w.sweep_once()["leases_recovered"] == 0  # nothing left to trip over


def test_the_claim_quarantines_an_intent_whose_policy_version_is_missing(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    """Found from outside: a row naming a version not stored (a bad restore,
    a hand edit) stopped the second tenant's sends until it was repaired."""
    hostile, victim = two_tenants(tidings)
    bad = [offer(hostile, n).id for n in (1, 2)]
    point(db_url, "intents", bad, MISSING)
    victims = [offer(victim, n).id for n in (1, 2, 3)]
    w = make_worker(tidings, simulator(clock))

    w.dispatch_once("sms")

    assert {victim.get(i).state for i in victims} == {IntentState.ACCEPTED}
    assert {intent_row(db_url, i) for i in bad} == {("failed", "UNDECODABLE")}
    assert quarantined_alerts(tidings, clock) == [(HOSTILE, "warning")]


def notice_job(t: Tidings, key: str) -> dict[str, Any]:
    t.publish_template("notice", channel="email", subject="Notice", body="A notice.")
    return t.create_job(
        idempotency_key=key,
        event_class="notice",
        purpose="transactional",
        template="notice",
        channels=["email"],
        audience=[{"ref": f"r-{i}", "email": f"r{i}@example.com"} for i in range(3)],
    )


def test_job_preparation_sets_the_hostile_job_aside_and_prepares_the_others(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    """Finding 1: `resend_budget: 10**30` made preparation of the oldest job
    fail every round for every tenant, and cancel answered 409."""
    hostile, victim = two_tenants(tidings)
    planted = [plant_policy(db_url, HOSTILE, v) for v in ("budget-1e30", "budget-2e31")]
    jobs = [notice_job(hostile, f"hostile-{n}") for n in range(3)]
    for job, version in zip(jobs, [*planted, MISSING], strict=True):
        point(db_url, "jobs", [job["id"]], version)
    clock.advance(1)  # the victim's job is younger: behind the hostile ones
    mine = notice_job(victim, "victim-1")

    tidings.prepare_jobs()

    prepared = victim.job(mine["id"])
    assert prepared["status"] != "preparing" and sum(prepared["counts"].values()) == 3
    for job in jobs:
        held = hostile.job(job["id"])
        assert (held["status"], held["quarantine_code"]) == ("preparing", "POLICY_UNREADABLE")
        assert hostile.cancel_job(job["id"], "operator") is not None  # no longer 409
    assert quarantined_alerts(tidings, clock) == [(HOSTILE, "warning")]


def test_alert_evaluation_survives_a_hostile_pending_limit(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    """Finding 2: `retry.max_pending_seconds: 1e300` made alert evaluation
    fail every round, so no tenant got alerts."""
    hostile, victim = two_tenants(tidings)
    point(db_url, "intents", [offer(hostile, 1).id], plant_policy(db_url, HOSTILE, "pending-1e300"))
    offer(victim, 1, expires_at=None)
    clock.advance(hours=7)  # past the default six hours unsent

    alerts = evaluate_alerts(tidings.db, clock.now())

    assert [a.tenant_id for a in alerts if a.condition == "pending_too_long"] == [VICTIM]


def delivered(t: Tidings, w: Any, clock: ManualClock, n: int) -> UUID:
    intent = offer(t, n)
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    assert t.get(intent.id).state is IntentState.DELIVERED
    return UUID(str(intent.id))


def evidence(db_url: str, intent_id: UUID) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM attempts WHERE intent_id = %s", [intent_id])
        found = row.fetchone()
    assert found is not None
    return int(found[0])


def test_the_purge_keeps_the_hostile_evidence_and_purges_everyone_elses(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    """Finding 2: `retention.attempt_evidence_days: 10**12` made `tidings
    purge` exit 1 for everyone."""
    hostile, victim = two_tenants(tidings)
    w = make_worker(tidings, simulator(clock))
    mine, theirs = delivered(victim, w, clock, 1), delivered(hostile, w, clock, 2)
    point(db_url, "intents", [theirs], plant_policy(db_url, HOSTILE, "evidence-1e12"))
    clock.advance(days=181)  # past the default policy's 180 days of attempt evidence

    removed = purge(tidings.db, clock.now())

    assert removed["attempts"] >= 1
    assert evidence(db_url, mine) == 0
    assert evidence(db_url, theirs) == 1  # its clock is unknown: kept, never guessed
    assert quarantined_alerts(tidings, clock) == [(HOSTILE, "warning")]


def test_tidings_purge_exits_zero_past_a_hostile_policy(
    tidings: Tidings, db_url: str, clock: ManualClock, tmp_path: Path, spawns: None
) -> None:
    """The operator's command, as a process: it used to exit 1."""
    hostile, _ = two_tenants(tidings)
    w = make_worker(tidings, simulator(clock))
    theirs = delivered(hostile, w, clock, 2)
    point(db_url, "intents", [theirs], plant_policy(db_url, HOSTILE, "evidence-1e12"))
    env = {"DATABASE_URL": db_url, "TIDINGS_HOME": str(tmp_path), "TIDINGS_SECRET_KEY": TEST_SECRET}
    done = subprocess.run(
        [sys.executable, "-m", "tidings.cli", "purge"],
        env={**os.environ, **env},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_running_worker_sends_the_victims_intents_past_hostile_rows(
    db_url: str, tmp_path: Path, spawns: None
) -> None:
    """The real processes: `tidings worker` and the simulator. The hostile
    tenant's pending intents name a missing version and a planted policy
    past the limits; the victim's are sent, each once."""
    with Tidings(db_url, secret_key=TEST_SECRET) as t:
        hostile, victim = two_tenants(t)
        bad = [offer(hostile, n).id for n in (1, 2, 3, 4)]
        point(db_url, "intents", bad[:2], MISSING)
        point(db_url, "intents", bad[2:], plant_policy(db_url, HOSTILE, "give-up-1e12"))
        victims = [offer(victim, n).id for n in range(1, 11)]
    with simulator_process(seed=5) as sim:
        proc = start_worker(db_url, tmp_path, sim)
        try:
            wait_until(
                lambda: {intent_row(db_url, i)[0] for i in victims} <= {"accepted", "delivered"},
                timeout=30,
                what="the victim's intents sent",
            )
            wait_until(
                lambda: {intent_row(db_url, i) for i in bad} == {("failed", "UNDECODABLE")},
                timeout=30,
                what="the hostile rows quarantined",
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        sent = [e["idempotency_key"] for e in ledger(sim) if e["outcome"] != "rejected"]
    assert len(sent) == len(set(sent)) == len(victims)


def test_event_pushes_set_aside_an_unreadable_event_and_push_the_others(
    tidings: Tidings, db_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pushes already run one tenant per thread; an event that cannot be
    read (JSON nested past the decoder's recursion limit, planted) now
    raises the tenant's alert and backs its endpoint off, instead of
    failing silently every round."""
    monkeypatch.setenv(ALLOW_PRIVATE, "1")
    hostile, victim = (ready_tenant(tidings.for_tenant(n)) for n in (HOSTILE, VICTIM))
    w = make_worker(tidings, simulator(clock))
    with receiver() as (theirs, hostile_port), receiver() as (mine, port):
        hostile.set_event_webhook(f"http://127.0.0.1:{hostile_port}/hooks", SECRET)
        victim.set_event_webhook(f"http://127.0.0.1:{port}/hooks", SECRET)
        canceled_offers(hostile, 1)
        with psycopg.connect(db_url) as conn:
            conn.execute(
                "UPDATE events SET payload = (repeat('[', 5000) || repeat(']', 5000))::jsonb"
                " WHERE tenant_id = %s",
                [HOSTILE],
            )
        canceled_offers(victim, 2)
        pushed = lambda: len([e for b in mine.bodies for e in b["events"]]) == 2  # noqa: E731
        # Events show once no older transaction runs anywhere on the server
        # (events.sql): a server shared with long bulk loads can take a while.
        deadline = time.monotonic() + 90
        while not pushed() and time.monotonic() < deadline:
            push_until(w, clock, pushed)
    assert [e["type"] for b in mine.bodies for e in b["events"]] == ["intent.canceled"] * 2
    assert theirs.bodies == []
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT last_error FROM event_webhooks WHERE tenant_id = %s", [HOSTILE]
        ).fetchone()
    assert row == ("UNDECODABLE",)
    assert quarantined_alerts(tidings, clock) == [(HOSTILE, "warning")]


def test_recording_a_batch_survives_one_tenants_unusable_schedule(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    """Finding 1: the batch that records acceptances raised OverflowError on
    one tenant's `give_up_after_seconds: 1e12`, and every tenant's sent
    intents in it stayed `sending`. The parser refuses such a schedule now
    (and the claim quarantines a stored one), so it is given here to a
    claim already made, as a policy parsed by an older release would be."""
    hostile, victim = two_tenants(tidings)
    victims = [offer(victim, n).id for n in (1, 2)]
    bad = offer(hostile, 3).id
    w = make_worker(tidings, simulator(clock))
    claims = w.claim("sms", 10)
    sent = []
    for c in claims:
        if c.intent.id == bad:
            schedule = copy.copy(c.policy.poll_schedule)
            object.__setattr__(schedule, "give_up_after_seconds", 1e12)  # around the checks
            c = dataclasses.replace(c, policy=dataclasses.replace(c.policy, poll_schedule=schedule))
        sent.append(Sent(c, Accepted(f"SM-{c.intent.id}")))

    with tidings.db.transaction() as conn:
        record_results(conn, sent, clock.now(), random.Random(7))

    for intent_id in victims:
        [attempt] = victim.get(intent_id).attempts
        assert attempt.state == "accepted"
        assert victim.get(intent_id).state is IntentState.ACCEPTED
    theirs = hostile.get(bad)
    assert theirs.state is IntentState.ACCEPTED  # a fact: the provider has it
    with psycopg.connect(db_url) as conn:
        plan = conn.execute(
            "SELECT next_check_at, checks_expire_at FROM attempts WHERE intent_id = %s", [bad]
        ).fetchone()
    assert plan == (None, None)  # receipts alone settle it
    assert quarantined_alerts(tidings, clock) == [(HOSTILE, "warning")]


def test_status_checks_go_on_past_an_attempt_whose_policy_version_went_missing(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    """Reconciliation already checks one attempt at a time; an attempt whose
    policy version cannot be read (quarantined by migration 0027, or gone)
    is now noted and alerted for its tenant instead of failing unseen."""
    hostile, victim = two_tenants(tidings)
    mine, theirs = offer(victim, 1).id, offer(hostile, 2).id
    # No receipt yet: each check finds the message still accepted and
    # schedules the next one, which reads the attempt's poll schedule.
    w = make_worker(tidings, simulator(clock, receipt_delay_ms=10**9))
    w.dispatch_once()
    point(db_url, "intents", [theirs], MISSING)
    clock.advance(10)

    w.reconcile_once()

    with psycopg.connect(db_url) as conn:
        checked = conn.execute(
            "SELECT check_count, next_check_at > %s FROM attempts WHERE intent_id = %s",
            [clock.now(), mine],
        ).fetchone()
    assert checked == (1, True)  # checked, and its next check scheduled
    with psycopg.connect(db_url) as conn:
        noted = conn.execute("SELECT tenant_id, loop, code FROM quarantine_log").fetchall()
    assert noted == [(HOSTILE, "reconcile", "POLICY_UNREADABLE")]
    assert quarantined_alerts(tidings, clock) == [(HOSTILE, "warning")]
