"""The claim's lanes (docs/concepts/lanes.md): what may wait behind what.

A job makes its whole audience due at once. Taken oldest-due first, every
intent created after it (a password reset, a class offer) waited behind
the whole backlog, and a second tenant's job behind the first tenant's.
Each test here builds that backlog and looks at one claim.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from tidings import ManualClock, Tidings
from tidings.dispatch.claim import ClaimRequest
from tidings.store import claims

from ..conftest import TEST_SECRET, publish_example_policy
from .dispatch_helpers import simulator, worker

pytestmark = pytest.mark.usefixtures("with_templates")


@pytest.fixture
def with_templates(tidings: Tidings) -> None:
    publish(tidings)


def publish(t: Tidings) -> None:
    t.publish_template("digest", channel="email", subject="Digest", body="Your digest.")
    t.publish_template(
        "reset",
        channel="email",
        subject="Reset",
        body="Reset {{ code }}.",
        required_variables=["code"],
    )


def tenant(db_url: str, clock: ManualClock, name: str) -> Tidings:
    t = Tidings(db_url, tenant=name, clock=clock, secret_key=TEST_SECRET)
    publish_example_policy(t)
    publish(t)
    return t


def job(t: Tidings, key: str, size: int, **extra: Any) -> str:
    created = t.create_job(
        **extra,
        idempotency_key=key,
        event_class="digest",
        purpose="transactional",
        template="digest",
        channels=["email"],
        audience=[{"ref": f"{key}-{i}", "email": f"{key}-{i}@example.com"} for i in range(size)],
    )
    t.prepare_jobs()
    return str(created["id"])


def reset(t: Tidings, n: int) -> str:
    made = t.notify(
        idempotency_key=f"reset:{n}",
        channel="email",
        recipient={"ref": f"user-{n}", "email": f"user{n}@example.com"},
        template="reset",
        variables={"code": str(n)},
        purpose="transactional",
        event_class="password_reset",
    )
    return str(made.id)


def claim(t: Tidings, clock: ManualClock, limit: int, **config: Any) -> list[Any]:
    w = worker(t, simulator(clock), **config)
    return w.claim("email", limit)


def by_lane(claimed: list[Any]) -> Counter[str]:
    return Counter(f"{c.intent.tenant_id}:{c.intent.job_id or 'single'}" for c in claimed)


def test_a_single_intent_is_claimed_before_a_jobs_backlog(
    tidings: Tidings, clock: ManualClock
) -> None:
    job(tidings, "digest-1", 300)
    clock.advance(5)
    resets = {reset(tidings, n) for n in range(3)}
    claimed = claim(tidings, clock, 50)
    assert len(claimed) == 50
    assert {str(c.intent.id) for c in claimed[:3]} == resets  # first, not after 300


def test_two_tenants_jobs_share_the_claim(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    first = job(tidings, "big", 400)
    clock.advance(60)
    other = tenant(db_url, clock, "acme")
    try:
        second = job(other, "small", 100)
        counts = by_lane(claim(tidings, clock, 40))
    finally:
        other.close()
    assert counts == {f"default:{first}": 20, f"acme:{second}": 20}


def test_a_tenants_jobs_share_its_part_and_not_the_others(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    one, two = job(tidings, "one", 200), job(tidings, "two", 200)
    other = tenant(db_url, clock, "acme")
    try:
        theirs = job(other, "theirs", 200)
        counts = by_lane(claim(tidings, clock, 40))
    finally:
        other.close()
    assert counts == {f"default:{one}": 10, f"default:{two}": 10, f"acme:{theirs}": 20}


def test_room_a_lane_leaves_goes_to_the_others(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    small = job(tidings, "small", 5)
    other = tenant(db_url, clock, "acme")
    try:
        big = job(other, "big", 200)
        counts = by_lane(claim(tidings, clock, 40))
    finally:
        other.close()
    assert counts == {f"default:{small}": 5, f"acme:{big}": 35}


def test_singles_take_their_share_and_jobs_the_rest(tidings: Tidings, clock: ManualClock) -> None:
    backlog = job(tidings, "digest-2", 100)
    clock.advance(1)
    for n in range(30):
        reset(tidings, n)
    counts = by_lane(claim(tidings, clock, 20, urgent_share=0.5))
    assert counts == {"default:single": 10, f"default:{backlog}": 10}
    alone = by_lane(claim(tidings, clock, 20, urgent_share=0.5))  # the job waits too
    assert alone == {"default:single": 10, f"default:{backlog}": 10}


def test_singles_alone_fill_the_whole_batch(tidings: Tidings, clock: ManualClock) -> None:
    for n in range(30):
        reset(tidings, n)
    assert by_lane(claim(tidings, clock, 20, urgent_share=0.5)) == {"default:single": 20}


def test_the_row_by_row_fallback_takes_the_batch_the_claim_takes(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    job(tidings, "digest-3", 100)
    other = tenant(db_url, clock, "acme")
    try:
        job(other, "theirs", 100)
        clock.advance(1)
        reset(tidings, 1)
        request = ClaimRequest("email", 30, "test", 30.0, "simulator", urgent_share=0.5)
        lanes = {
            "channel": "email",
            "now": clock.now(),
            "limit": request.limit,
            "account": request.provider,
            "lanes": request.lanes,
        }
        with tidings.db.transaction() as conn, conn.transaction(force_rollback=True):
            by_id = set(claims.due_ids(conn, **lanes))
        with tidings.db.transaction() as conn, conn.transaction(force_rollback=True):
            claimed = {(r["tenant_id"], r["id"]) for r in claims.due(conn, **lanes)}
    finally:
        other.close()
    assert by_id == claimed and len(claimed) == 30


def test_a_job_near_its_deadline_goes_before_the_shares(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Tokens that expire in five minutes go before a newsletter prepared
    earlier, earliest deadline first; a deadline far off shares as usual."""
    newsletter = job(tidings, "newsletter", 200)
    clock.advance(5)
    far = job(tidings, "far", 200, expires_at=clock.now() + timedelta(hours=6))
    resets = job(tidings, "resets", 50, expires_at=clock.now() + timedelta(minutes=5))
    counts = by_lane(claim(tidings, clock, 40))
    assert counts[f"default:{resets}"] == 40
    counts = by_lane(claim(tidings, clock, 40))
    assert counts[f"default:{resets}"] == 10
    shared = counts[f"default:{newsletter}"], counts[f"default:{far}"]
    assert sum(shared) == 30 and min(shared) >= 10  # both jobs go on beside the deadline
