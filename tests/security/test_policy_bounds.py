"""Issue #39, findings 1 and 2: every number in a policy document is bounded.

A tenant's `admin` key publishes policies. With no upper bounds, one
tenant's `poll_schedule.give_up_after_seconds: 1e12` made recording and
lease recovery raise `OverflowError` for every tenant's batch,
`resend_budget: 10**30` stopped job preparation for everyone,
`retention.attempt_evidence_days: 10**12` stopped `tidings purge`, and
`retry.max_pending_seconds: 1e300` stopped alert evaluation. Each number
is now refused where it enters (422 naming the field over HTTP,
`InvalidInput` from the library), with nothing stored; the limits are
`tidings.domain.policy_bounds` and docs/security.md.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from tests.conftest import TEST_SECRET
from tests.integration.api_support import (
    auth,
    client,
    intent_body,
    is_problem,
    new_key,
    publish_offer,
)
from tests.integration.observability_helpers import evaluate_alerts
from tidings import Tidings
from tidings.domain import policy_bounds
from tidings.domain.errors import InvalidInput, PolicyUnreadable
from tidings.domain.policy_document import PolicyError, parse_policy
from tidings.policies import builtin_document
from tidings.store import migrate as migrations
from tidings.store import policies as policy_store

# (field path, a hostile value): the numbers, and one past each limit.
HOSTILE: list[tuple[str, Any]] = [
    ("poll_schedule.give_up_after_seconds", 1e12),
    ("poll_schedule.first_check_after_seconds", 10**400),
    ("poll_schedule.max_interval_seconds", 1e300),
    ("poll_schedule.factor", 1e300),
    ("poll_schedule.max_checks", 10**9),
    ("resend_budget", 10**30),
    ("resend_budget", 2**31),
    ("retention.attempt_evidence_days", 10**12),
    ("retention.recipient_evidence_days", 10**6),
    ("retention.observation_days", 2**31),
    ("retention.job_facts_days", policy_bounds.MAX_RETENTION_DAYS + 1),
    ("retry.max_pending_seconds", 1e300),
    ("retry.base_seconds", 1e12),
    ("retry.max_seconds", 1e12),
    ("retry.max_failures", 2**40),
    ("frequency_caps[0].limit", 2**31),
    ("frequency_caps[0].per_seconds", 10**12),
    ("rate_limits[0].limit", 10**30),
    ("rate_limits[0].per_seconds", policy_bounds.MAX_SECONDS + 1),
    ("country_spend_limits.sms.DE.segments", 2**31),
    ("country_spend_limits.sms.DE.per_seconds", 10**12),
]


def hostile_document(path: str, value: Any, version: str = "hostile-1") -> dict[str, Any]:
    doc = copy.deepcopy(builtin_document("eu"))
    doc["version"] = version
    target: Any = doc
    keys = path.replace("[", ".").replace("]", "").split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[keys[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value"), HOSTILE)
def test_the_parser_refuses_each_number_past_its_limit_naming_the_field(
    path: str, value: Any
) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(hostile_document(path, value))
    assert raised.value.field == path


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused(value: float) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(hostile_document("poll_schedule.give_up_after_seconds", value))
    assert raised.value.field == "poll_schedule.give_up_after_seconds"


def test_every_limit_is_accepted_at_its_maximum() -> None:
    """The limits are inclusive, and the shipped policies sit well inside them."""
    doc = builtin_document("eu")
    doc["resend_budget"] = policy_bounds.MAX_RESEND_BUDGET
    doc["poll_schedule"] |= {
        "factor": policy_bounds.MAX_POLL_FACTOR,
        "max_checks": policy_bounds.MAX_CHECKS,
        "max_interval_seconds": policy_bounds.MAX_SECONDS,
        "give_up_after_seconds": policy_bounds.MAX_SECONDS,
    }
    doc["retry"] |= {
        "max_seconds": policy_bounds.MAX_SECONDS,
        "max_pending_seconds": policy_bounds.MAX_SECONDS,
        "max_failures": policy_bounds.MAX_FAILURES,
    }
    doc["retention"] = dict.fromkeys(doc["retention"], policy_bounds.MAX_RETENTION_DAYS)
    doc["rate_limits"][0] |= {"limit": policy_bounds.MAX_COUNT, "per_seconds": 31622400}
    policy = parse_policy(doc)
    assert policy.poll_schedule.give_up_after_seconds == policy_bounds.MAX_SECONDS
    for name in ("default", "eu", "us"):
        parse_policy(builtin_document(name))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("poll_schedule.give_up_after_seconds", 1e12),
        ("resend_budget", 10**30),
        ("resend_budget", 2**31),
        ("retention.attempt_evidence_days", 10**12),
        ("retry.max_pending_seconds", 1e300),
    ],
)
def test_the_api_answers_422_naming_the_field_and_stores_nothing(
    tidings: Tidings, db_url: str, path: str, value: Any
) -> None:
    api = client(tidings)
    key = auth(new_key(tidings, "hostile"))
    # JSON carries the big integers as written, not as floats.
    body = json.dumps(hostile_document(path, value))
    response = api.post(
        "/v1/policies", content=body, headers={**key, "content-type": "application/json"}
    )
    problem = is_problem(response, 422, "VALUE_OUT_OF_RANGE")
    assert problem["field"] == path
    with psycopg.connect(db_url) as conn:
        stored = conn.execute(
            "SELECT count(*) FROM policies WHERE tenant_id = 'hostile' AND version = 'hostile-1'"
        ).fetchone()
    assert stored == (0,)


def test_the_library_raises_invalid_input_naming_the_field(tidings: Tidings) -> None:
    for path, value in HOSTILE:
        with pytest.raises(InvalidInput) as raised:
            tidings.publish_policy(hostile_document(path, value))
        assert raised.value.field == path
        assert raised.value.code == "VALUE_OUT_OF_RANGE"


def test_the_database_function_agrees_with_the_parser(tidings: Tidings, db_url: str) -> None:
    """Migration 0027 finds stored documents past the limits with a SQL
    function; it names the same field the parser does, and nothing for a
    document the parser accepts."""
    with psycopg.connect(db_url) as conn:

        def violation(doc: dict[str, Any]) -> str | None:
            row = conn.execute(
                "SELECT policy_out_of_bounds(%s::jsonb)", [json.dumps(doc)]
            ).fetchone()
            assert row is not None
            return row[0]

        for path, value in HOSTILE:
            assert violation(hostile_document(path, value)) == path
        for name in ("default", "eu", "us"):
            assert violation(builtin_document(name)) is None
        # Not a number at all: the parser refuses it; the function only
        # answers for numbers past a limit, so a planted string is left to
        # the loops' quarantine.
        assert violation(hostile_document("resend_budget", "many")) is None


def test_migration_0027_quarantines_a_stored_policy_past_the_limits(fresh_db: str) -> None:
    """A version published before the limits stays stored (intents name it)
    but is quarantined: never current again, noted and alerted for its
    tenant, and the tenant's sound version decides new intents."""
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        for migration in migrations.available():
            if migration.version < 27:
                with conn.transaction():
                    migrations._apply_if_pending(conn, migration)
        conn.execute("INSERT INTO tenants (tenant_id, name) VALUES ('hostile', 'hostile')")
        for version, doc, at in [
            ("sound", builtin_document("default"), "2026-01-01"),
            ("huge", hostile_document("poll_schedule.give_up_after_seconds", 1e12), "2026-02-01"),
        ]:
            conn.execute(
                "INSERT INTO policies (tenant_id, version, name, document, published_at,"
                " published_by) VALUES ('hostile', %s, 'p', %s::jsonb, %s, 'old release')",
                [version, json.dumps({**doc, "version": version}), at],
            )
    migrations.migrate(fresh_db)
    with Tidings(fresh_db, secret_key=TEST_SECRET) as t:
        hostile = t.for_tenant("hostile")
        with hostile.db.transaction() as conn:
            assert policy_store.current(conn, "hostile").version == "sound"  # type: ignore[union-attr]
            with pytest.raises(PolicyUnreadable):
                policy_store.by_version(conn, "hostile", "huge")
            logged = conn.execute(
                "SELECT loop, subject, code, error FROM quarantine_log WHERE tenant_id = 'hostile'"
            ).fetchall()
        assert [tuple(r.values()) for r in logged] == [
            (
                "migration",
                "policy:huge",
                "POLICY_OUT_OF_BOUNDS",
                "poll_schedule.give_up_after_seconds",
            )
        ]
        alerts = evaluate_alerts(t.db, datetime.now(UTC))
        assert [(a.tenant_id, a.condition) for a in alerts] == [("hostile", "quarantined")]


def test_a_tenant_whose_stored_policy_cannot_be_read_gets_409_not_500(
    tidings: Tidings, db_url: str
) -> None:
    """`resend_budget: 2**31` once made the tenant's own POST /v1/intents
    answer 500. Planted around the checks now, it answers 409 with a code."""
    publish_offer(tidings, "hostile")
    key = auth(new_key(tidings, "hostile"))
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO policies (tenant_id, version, name, document, published_at, published_by)"
            " VALUES ('hostile', 'big', 'p', %s::jsonb, now() + interval '1 day', 'planted')",
            [json.dumps(hostile_document("resend_budget", 2**31, "big"))],
        )
    response = client(tidings).post("/v1/intents", json=intent_body(tidings), headers=key)
    is_problem(response, 409, "POLICY_UNREADABLE")
