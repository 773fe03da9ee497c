"""Months of evidence (domain/evidence_months.py): an intent's id places it
in the month it was made in, and an attempt key names its intent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.evidence_months import Month, created_at, id_floor, months, overdue
from tidings.domain.ids import uuid7
from tidings.domain.keys import attempt_key, intent_of_attempt_key

moments = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(8999, 12, 31), timezones=st.just(UTC)
)


@given(moments, moments)
def test_an_id_is_at_or_above_a_moments_floor_exactly_when_made_at_or_after_it(
    made: datetime, moment: datetime
) -> None:
    made_ms = int(made.timestamp() * 1000)
    moment_ms = int(moment.timestamp() * 1000)
    intent_id = uuid7(made)
    assert (intent_id.bytes >= id_floor(moment).bytes) == (made_ms >= moment_ms)


@given(moments)
def test_an_id_falls_in_the_month_it_was_made_in(made: datetime) -> None:
    intent_id = uuid7(made)
    month = Month.of(made)
    assert month.lower_id.bytes <= intent_id.bytes < month.upper_id.bytes
    assert Month.of_intent(intent_id) == month
    assert abs(created_at(intent_id) - made) < timedelta(milliseconds=1)


def test_months_follow_the_calendar() -> None:
    december = Month(2026, 12)
    assert december.next() == Month(2027, 1) == december.plus(1)
    assert december.plus(-12) == Month(2025, 12) and december.plus(14) == Month(2028, 2)
    assert december.ends_at == datetime(2027, 1, 1, tzinfo=UTC)
    assert str(december) == "2026-12" and december.partition("attempts") == "attempts_2026_12"
    assert months(Month(2026, 11), Month(2027, 2)) == [
        Month(2026, 11), december, Month(2027, 1), Month(2027, 2)
    ]  # fmt: skip
    with pytest.raises(ValueError, match="not a partitioned"):
        december.partition("intents")


def test_a_month_is_overdue_once_its_last_day_plus_the_clock_has_passed() -> None:
    january = Month(2027, 1)
    due = datetime(2027, 2, 1, tzinfo=UTC) + timedelta(days=30)
    assert not overdue(january, 30, due - timedelta(seconds=1))
    assert overdue(january, 30, due)


@given(st.uuids(), st.integers(1, 10_000))
def test_an_attempt_key_names_its_intent(intent_id: object, n: int) -> None:
    key = attempt_key(str(intent_id), n)
    assert intent_of_attempt_key(key) == intent_id


# A fixed id: parallel runners must collect the same test names.
ANY_ID = UUID("0191f3a1-2b3c-4d5e-8f60-718293a4b5c6")


@pytest.mark.parametrize(
    "key",
    [
        "waitlist:771:1842:offer:1:attempt:1",  # a key from before this format
        "tdg:not-a-uuid:1",
        f"tdg:{ANY_ID}:0",
        f"tdg:{ANY_ID}:x",
        f"tdg:{ANY_ID}",
        f"TDG:{ANY_ID}:1",
        f"tdg:{str(ANY_ID).upper()}:1",  # not the form we write
        f"tdg:{ANY_ID}:1:2",
    ],
)
def test_anything_else_names_no_intent(key: str) -> None:
    assert intent_of_attempt_key(key) is None
