"""Issue #20, item 1 (and item 11's naive job expiry): a tenant-supplied
time outside 1970-01-01..9000-01-01 UTC is refused with a 422 and nothing
is stored, whichever way it comes in; the database refuses it too.

Invariant 11: one tenant cannot hurt another. A year-10000 expiry once
committed, answered 500, then stopped every tenant's claims.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import psycopg
import pytest

from tests.integration.api_support import (
    auth,
    client,
    count,
    intent_body,
    is_problem,
    new_key,
    publish_offer,
)
from tidings import Tidings
from tidings.domain.errors import DateOutOfRange, InvalidInput
from tidings.domain.moments import EARLIEST, LATEST, check_moment
from tidings.jobs.request import parse_job
from tidings.store.contacts import ConsentRecord

# Year 10000 and year 0 in UTC, though each reads as a valid local time.
TOO_LATE = "9999-12-31T23:59:59-23:59"
TOO_EARLY = "0001-01-01T00:00:00+23:59"
OUT_OF_RANGE = [TOO_LATE, TOO_EARLY, "1969-12-31T23:59:59Z", "9000-01-01T00:00:00Z"]


def test_the_bounds_are_half_open_and_compare_without_overflow() -> None:
    assert check_moment("t", EARLIEST) == EARLIEST
    last = LATEST - timedelta(microseconds=1)
    assert check_moment("t", last) == last
    with pytest.raises(DateOutOfRange):
        check_moment("t", LATEST)
    for text in OUT_OF_RANGE:
        with pytest.raises(DateOutOfRange) as raised:
            check_moment("t", datetime.fromisoformat(text))
        assert raised.value.code == "DATE_OUT_OF_RANGE"
    with pytest.raises(InvalidInput):
        check_moment("t", datetime(2030, 1, 1))  # naive


@pytest.mark.parametrize("field", ["expires_at", "not_before"])
@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_an_intent_with_an_unreadable_time_is_refused_and_nothing_commits(
    tidings: Tidings, db_url: str, field: str, value: str
) -> None:
    publish_offer(tidings, "hostile")
    api = client(tidings)
    before = count(db_url, "intents")
    body = intent_body(tidings, **{field: value})
    response = api.post("/v1/intents", json=body, headers=auth(new_key(tidings, "hostile")))
    problem = is_problem(response, 422, "DATE_OUT_OF_RANGE")
    assert problem["field"] == field
    assert count(db_url, "intents") == before
    assert count(db_url, "transitions") == 0


def test_the_library_refuses_the_same_times(tidings: Tidings, db_url: str) -> None:
    publish_offer(tidings, tidings.tenant)
    for value in OUT_OF_RANGE:
        with pytest.raises(DateOutOfRange):
            tidings.notify(
                idempotency_key=f"k-{value}",
                channel="sms",
                recipient={"ref": "m1", "phone": "+14155550123"},
                template="waitlist_offer",
                variables={"class_name": "Spin", "deadline": "18:00"},
                purpose="transactional",
                event_class="waitlist_offer",
                not_before=datetime.fromisoformat(value),
            )
    assert count(db_url, "intents") == 0


@pytest.mark.parametrize("field", ["captured_at", "revoked_at"])
def test_consent_evidence_with_an_unreadable_time_is_refused(
    tidings: Tidings, db_url: str, field: str
) -> None:
    api = client(tidings)
    consent: dict[str, Any] = {
        "channel": "sms",
        "purpose": "transactional",
        "source": "signup-form",
        "captured_at": "2026-01-01T00:00:00Z",
    }
    consent[field] = TOO_LATE
    response = api.put(
        "/v1/contacts/member-1",
        json={"phone": "+14155550123", "consents": [consent]},
        headers=auth(new_key(tidings, "hostile")),
    )
    is_problem(response, 422, "DATE_OUT_OF_RANGE")
    assert count(db_url, "consents") == 0
    assert count(db_url, "contacts") == 0  # the whole request, not half of it


def test_consent_evidence_without_an_offset_is_refused(tidings: Tidings, db_url: str) -> None:
    api = client(tidings)
    consent = {"channel": "sms", "purpose": "p", "source": "s", "captured_at": "2026-01-01T00:00"}
    response = api.put(
        "/v1/contacts/member-1",
        json={"phone": "+14155550123", "consents": [consent]},
        headers=auth(new_key(tidings, "hostile")),
    )
    is_problem(response, 422, "INVALID_INPUT")
    assert count(db_url, "consents") == 0


def test_the_library_refuses_consent_out_of_range(tidings: Tidings, db_url: str) -> None:
    consent = ConsentRecord("sms", "p", "s", datetime.fromisoformat(TOO_EARLY))
    with pytest.raises(DateOutOfRange):
        tidings.put_contact("m1", phone="+14155550123", consents=[consent])
    assert count(db_url, "consents") == 0


def _job(**extra: Any) -> dict[str, Any]:
    return {
        "idempotency_key": "job-1",
        "event_class": "notice",
        "purpose": "transactional",
        "template": {"name": "notice"},
        "channels": ["sms"],
        "audience": [{"ref": "r1", "phone": "+14155550123"}],
        **extra,
    }


@pytest.mark.parametrize(
    "extra",
    [
        # item 11: a naive expiry next to a token TTL was compared with an
        # aware time and answered 500
        {"expires_at": "2030-01-01T00:00:00", "token_ttl_seconds": 600},
        {"expires_at": TOO_LATE},
        {"expires_at": TOO_EARLY, "token_ttl_seconds": 600},
    ],
)
def test_a_job_with_an_unusable_expiry_is_refused(
    tidings: Tidings, db_url: str, extra: dict[str, Any]
) -> None:
    tidings.for_tenant("hostile").publish_template("notice", channel="sms", body="Notice")
    api = client(tidings)
    response = api.post("/v1/jobs", json=_job(**extra), headers=auth(new_key(tidings, "hostile")))
    assert response.status_code == 422, response.text
    assert response.json()["code"] in {"INVALID_INPUT", "DATE_OUT_OF_RANGE"}
    assert count(db_url, "jobs") == 0


def test_the_library_job_path_refuses_them_too() -> None:
    for expires_at in (datetime(2030, 1, 1), datetime.fromisoformat(TOO_LATE)):
        with pytest.raises(InvalidInput):
            parse_job(_job(expires_at=expires_at, token_ttl_seconds=600))


# --- the database refuses what a path around the checks would store --------------


BOUNDED = [
    ("intents", "expires_at"),
    ("intents", "not_before"),
    ("intents", "next_due_at"),
    ("consents", "captured_at"),
    ("consents", "revoked_at"),
    ("jobs", "expires_at"),
]


@pytest.mark.parametrize(("table", "column"), BOUNDED)
@pytest.mark.parametrize("value", ["10000-01-01 00:00:00+00", "0001-01-01 00:00:00+00 BC"])
def test_the_database_refuses_an_unbounded_time(
    tidings: Tidings, db_url: str, table: str, column: str, value: str
) -> None:
    _one_of_each(tidings)
    with psycopg.connect(db_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        # test-only SQL over fixed names: the path a buggy or hostile writer would take
        conn.execute(f"UPDATE {table} SET {column} = %s::timestamptz", [value])


def test_copy_is_refused_too(tidings: Tidings, db_url: str) -> None:
    tenant = tidings.tenant
    tidings.put_contact("m1", phone="+14155550123")
    with (
        psycopg.connect(db_url) as conn,
        pytest.raises(psycopg.errors.CheckViolation),
        conn.cursor().copy(
            "COPY consents (tenant_id, ref, channel, purpose, source, captured_at, recorded_at)"
            " FROM STDIN"
        ) as copy,
    ):
        copy.write_row([tenant, "m1", "sms", "p", "s", "10000-01-01 00:00+00", "2026-01-01"])


def test_sql_constraints_spell_the_domain_bounds() -> None:
    sql_dir = resources.files("tidings.store").joinpath("sql")
    migration = sql_dir.joinpath("migrations", "0013_bounded_dates.sql").read_text()
    schema = sql_dir.joinpath("schema.sql").read_text()
    for text in (migration, schema):
        literals = set(re.findall(r"'(\d{4}-\d\d-\d\d [^']*)'", text))
        assert literals >= {
            f"{EARLIEST:%Y-%m-%d} 00:00:00+00",
            f"{LATEST:%Y-%m-%d} 00:00:00+00",
        }, literals


def _one_of_each(t: Tidings) -> None:
    t.publish_template("notice", channel="sms", body="Notice")
    t.put_contact(
        "m1",
        phone="+14155550123",
        consents=[
            ConsentRecord(
                "sms",
                "p",
                "s",
                datetime(2026, 1, 1, tzinfo=UTC),
                revoked_at=datetime(2027, 1, 1, tzinfo=UTC),
            )
        ],
    )
    t.notify(
        idempotency_key="k1",
        channel="sms",
        recipient={"ref": "m1", "phone": "+14155550123"},
        template="notice",
        purpose="transactional",
        event_class="notice",
        expires_at=t.clock.now() + timedelta(hours=1),
        not_before=t.clock.now(),
    )
    t.create_job(
        idempotency_key="job-1",
        event_class="notice",
        purpose="transactional",
        template="notice",
        channels=["sms"],
        audience=[{"ref": "r1", "phone": "+14155550123"}],
        expires_at=t.clock.now() + timedelta(hours=1),
    )
