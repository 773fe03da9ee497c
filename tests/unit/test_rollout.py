from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

from tidings.domain.intent import Intent, IntentState
from tidings.domain.rollout import Cohort, Scope, ShadowControl, cohort_bucket, cohort_of

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _intent(created_at: datetime = AT, **values: Any) -> Intent:
    row: dict[str, Any] = {f.name: None for f in fields(Intent)}
    row.update(
        tenant_id="t", id=uuid4(), idempotency_key="k", channel="sms", state=IntentState.PENDING,
        version=1, recipient_ref="m1", country="DE", template_name="offer", variables={},
        purpose="marketing", event_class="promo", resend_budget=0, attempt_count=0,
        created_by="test", created_at=created_at, updated_at=created_at, attempts=(),
    )  # fmt: skip
    row.update(values)
    return Intent(**row)


def test_a_recipients_bucket_is_stable_and_spread() -> None:
    buckets = [cohort_bucket("acme", f"member-{n}") for n in range(2000)]
    assert buckets == [cohort_bucket("acme", f"member-{n}") for n in range(2000)]
    assert set(buckets) == set(range(100))
    assert 150 <= sum(b < 10 for b in buckets) <= 250  # about a tenth


def test_a_recipient_live_at_a_percent_is_live_at_any_larger_one() -> None:
    for bucket in range(100):
        lives = [Cohort(bucket, p).live for p in range(101)]
        assert lives == sorted(lives)  # False... then True: never back
        assert Cohort(bucket, 0).live is False and Cohort(bucket, 100).live is True


def test_a_scope_covers_by_every_named_field_and_blank_is_all() -> None:
    intent = _intent()
    assert Scope().covers(intent)
    assert Scope("sms", "DE", "marketing", "promo").covers(intent)
    assert not Scope(purpose="transactional").covers(intent)
    assert not Scope(event_class="reset").covers(intent)
    assert not Scope(country="FR").covers(_intent(country=None))


def test_the_smallest_covering_percent_decides_and_other_tenants_do_not_count() -> None:
    intent = _intent()
    broad = ShadowControl("t", Scope(channel="sms"), live_percent=100)
    narrow = ShadowControl("t", Scope(purpose="marketing"), live_percent=0)
    elsewhere = ShadowControl("other", Scope(), live_percent=0)
    assert cohort_of(intent, [broad, elsewhere]) == Cohort(cohort_bucket("t", "m1"), 100)
    cohort = cohort_of(intent, [broad, narrow])
    assert cohort is not None and not cohort.live
    assert cohort_of(intent, [elsewhere]) is None


def test_a_control_turned_off_covers_only_what_was_created_while_it_was_on() -> None:
    ended = ShadowControl("t", Scope(), was_on=(AT, AT + timedelta(hours=1)))
    assert ended.covers(_intent(AT + timedelta(minutes=59)))
    assert not ended.covers(_intent(AT + timedelta(hours=1)))
    assert not ended.covers(_intent(AT - timedelta(seconds=1)))
