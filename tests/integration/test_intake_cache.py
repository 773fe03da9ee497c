"""A create chooses its policy version and template revision from a cache
in the process, and its insert checks that the choice is still current.

Two `Tidings` objects stand for two processes, each with its own cache:
one publishes, the other's next create must use what was published, never
what it remembered. Interleavings are explicit (a hook between two
statements), never timed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from unittest import mock
from uuid import uuid4

import psycopg
import pytest
from fastapi.testclient import TestClient

from tidings import IdempotencyConflict, InvalidInput, ManualClock, Tidings
from tidings.domain.errors import MissingVariables
from tidings.policies import builtin_document
from tidings.store import database, ledger

from ..conftest import TEST_SECRET
from .api_support import TENANT, auth, client, count, intent_body, new_key, publish_offer
from .dispatch_helpers import OFFER_BODY, offer, publish_offer_template


@pytest.fixture
def other(db_url: str, clock: ManualClock) -> Iterator[Tidings]:
    """A second process of the same tenant: its own pool and its own cache."""
    t = Tidings(db_url, clock=clock, secret_key=TEST_SECRET)
    yield t
    t.close()


@pytest.fixture(autouse=True)
def offer_template(tidings: Tidings) -> None:
    publish_offer_template(tidings)


def publish_policy(t: Tidings, clock: ManualClock, version: str, budget: int) -> str:
    """A new version, published after every earlier one (the newest is current)."""
    clock.advance(seconds=1)
    return t.publish_policy({**builtin_document("default"), "version": version,
                             "resend_budget": budget})  # fmt: skip


def publish_revision(t: Tidings, body: str = OFFER_BODY, **options: Any) -> int:
    return t.publish_template(
        "waitlist_offer",
        channel="sms",
        body=body,
        required_variables=options.pop("required_variables", ["class_name", "deadline"]),
        **options,
    ).revision


def created_with(db_url: str, intent_id: object) -> tuple[str | None, int]:
    """The policy version and template revision the creation's audit row and
    the intent record (invariant 9): both must agree."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT i.policy_version, i.template_revision, t.policy_version "
            "FROM intents i JOIN transitions t ON t.tenant_id = i.tenant_id "
            "AND t.intent_id = i.id AND t.event = 'create' WHERE i.id = %s",
            (intent_id,),
        ).fetchone()
    assert row is not None and row[0] == row[2]
    return row[0], row[1]


class Statements:
    """The named queries issued, in order, while patched in."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.real = database.q

    def __call__(self, name: str) -> str:
        self.names.append(name)
        return self.real(name)


@pytest.fixture
def statements() -> Iterator[Statements]:
    seen = Statements()
    with mock.patch.object(database, "q", seen):
        yield seen


def after_read(hook: Callable[[], object], nth: int = 1) -> Any:
    """Patch the intake read so that `hook` runs right after its `nth` call
    returned: a publish committed between the refresh and the insert."""
    real = ledger.intake_context
    calls = {"n": 0}

    def reading(*args: Any, **kwargs: Any) -> Any:
        rows = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == nth:
            hook()
        return rows

    return mock.patch.object(ledger, "intake_context", reading)


def test_a_warm_cache_issues_only_the_create(tidings: Tidings, statements: Statements) -> None:
    offer(tidings, 1)
    statements.names.clear()
    offer(tidings, 2)
    # (and, after its commit, the waker's NOTIFY on its own connection)
    assert [n for n in statements.names if n != "wake_workers"] == ["create_intent"]


def test_a_policy_published_by_another_process_is_used_by_the_next_create(
    tidings: Tidings, other: Tidings, clock: ManualClock, db_url: str
) -> None:
    first = offer(other, 1)
    assert first.policy_version == "default-1" and first.resend_budget == 1
    publish_policy(tidings, clock, "strict-2", budget=3)
    second = offer(other, 2)
    assert (second.policy_version, second.resend_budget) == ("strict-2", 3)
    assert created_with(db_url, second.id) == ("strict-2", 1)


def test_a_revision_published_by_another_process_is_used_by_the_next_create(
    tidings: Tidings, other: Tidings, db_url: str
) -> None:
    assert offer(other, 1).template_revision == 1
    assert publish_revision(tidings, "Spot in {{ class_name }} until {{ deadline }}.") == 2
    second = offer(other, 2)
    assert second.template_revision == 2
    assert created_with(db_url, second.id) == ("default-1", 2)


def test_a_revision_in_a_new_locale_reaches_the_recipients_of_that_locale(
    tidings: Tidings, other: Tidings
) -> None:
    french = {"ref": "member-7", "phone": "+33612345678", "locale": "fr"}
    assert offer(other, 1, recipient=french).template_revision == 1  # falls back to en
    body = "Une place en {{ class_name }}, jusqu'à {{ deadline }}."
    assert publish_revision(tidings, body, locale="fr") == 2
    assert offer(other, 2, recipient=french).template_revision == 2
    assert offer(other, 3).template_revision == 1  # an English reader keeps revision 1


def test_a_pinned_revision_stays_pinned_and_still_takes_the_current_policy(
    tidings: Tidings, other: Tidings, clock: ManualClock, statements: Statements
) -> None:
    pinned = {"name": "waitlist_offer", "revision": 1}
    assert offer(other, 1, template=pinned).template_revision == 1
    publish_revision(tidings, "Spot in {{ class_name }} until {{ deadline }}.")
    statements.names.clear()
    assert offer(other, 2, template=pinned).template_revision == 1
    # A new revision does not touch a pinned one (the waker's NOTIFY runs on its own).
    assert [n for n in statements.names if n != "wake_workers"] == ["create_intent"]
    publish_policy(tidings, clock, "strict-2", budget=2)
    third = offer(other, 3, template=pinned)
    assert (third.template_revision, third.policy_version) == (1, "strict-2")
    with pytest.raises(InvalidInput, match="revision 9"):
        offer(other, 4, template={"name": "waitlist_offer", "revision": 9})


@pytest.mark.no_policy
def test_a_tenant_without_policy_gets_the_policy_it_publishes_next(
    tidings: Tidings, other: Tidings, clock: ManualClock, db_url: str
) -> None:
    denied = offer(other, 1)
    assert denied.policy_version is None  # the claim denies it with POLICY_MISSING
    assert offer(other, 2).policy_version is None
    publish_policy(tidings, clock, "first-1", budget=2)
    allowed = offer(other, 3)
    assert (allowed.policy_version, allowed.resend_budget) == ("first-1", 2)
    assert created_with(db_url, allowed.id) == ("first-1", 1)


def test_a_replay_with_a_stale_cache_returns_the_first_intent(
    tidings: Tidings, other: Tidings, clock: ManualClock
) -> None:
    until = clock.now() + timedelta(hours=1)
    first = offer(other, 1, expires_at=until)
    publish_policy(tidings, clock, "strict-2", budget=3)
    publish_revision(tidings, "Spot in {{ class_name }} until {{ deadline }}.")
    assert offer(other, 1, expires_at=until) == first
    with pytest.raises(IdempotencyConflict):
        offer(other, 1, expires_at=until, variables={"class_name": "Yoga", "deadline": "9"})


def test_a_new_revision_needing_another_variable_refuses_the_next_create(
    tidings: Tidings, other: Tidings, db_url: str
) -> None:
    offer(other, 1)
    publish_revision(
        tidings,
        "{{ class_name }} until {{ deadline }} at {{ studio }}",
        required_variables=["class_name", "deadline", "studio"],
    )
    with pytest.raises(MissingVariables) as refused:
        offer(other, 2)
    assert refused.value.missing == ("studio",)
    assert count(db_url, "intents") == 1
    # and the other way: a revision that needs less lets a create through
    # that the remembered one would have refused
    publish_revision(tidings, "{{ class_name }} is open", required_variables=["class_name"])
    assert offer(other, 3, variables={"class_name": "Yoga"}).template_revision == 3


def test_a_publish_between_the_refresh_and_the_retry_is_seen_too(
    tidings: Tidings, other: Tidings, clock: ManualClock, db_url: str
) -> None:
    offer(other, 1)
    publish_policy(tidings, clock, "strict-2", budget=2)
    # other's insert finds strict-2 current, it reads again, and before its
    # second insert strict-3 commits: that insert must refuse strict-2 too.
    with after_read(lambda: publish_policy(tidings, clock, "strict-3", budget=3)):
        third = offer(other, 2)
    assert (third.policy_version, third.resend_budget) == ("strict-3", 3)
    assert created_with(db_url, third.id) == ("strict-3", 1)


def test_the_insert_writes_nothing_under_a_choice_no_longer_current(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    captured: list[dict[str, Any]] = []
    real = ledger.fetch_one

    def capturing(conn: Any, name: str, params: Any) -> Any:
        if name == "create_intent":
            captured.append(dict(params))
        return real(conn, name, params)

    with mock.patch.object(ledger, "fetch_one", capturing):
        offer(tidings, 1)
    stale = {**captured[0], "idempotency_key": "replayed", "id": uuid4()}
    publish_policy(tidings, clock, "strict-2", budget=2)
    with tidings.db.statements() as conn:
        outcome = ledger.create_intent(conn, stale)
    assert not outcome.current and outcome.intent is None
    assert count(db_url, "intents") == 1 and count(db_url, "transitions") == 1


def test_http_creates_through_the_same_cache_and_check(
    tidings: Tidings, clock: ManualClock, db_url: str, statements: Statements
) -> None:
    publish_offer(tidings, TENANT)
    http = client(tidings)
    http.headers.update(auth(new_key(tidings, TENANT)))
    elsewhere = Tidings(db_url, tenant=TENANT, clock=clock, secret_key=TEST_SECRET)
    try:
        _http_race(http, tidings, elsewhere, clock, statements)
    finally:
        elsewhere.close()


def _http_race(
    http: TestClient, t: Tidings, elsewhere: Tidings, clock: ManualClock, seen: Statements
) -> None:
    replayed = intent_body(t, 1)  # its expiry fixed now: a replay must be the same body
    first = http.post("/v1/intents", json=replayed)
    assert first.status_code == 201, first.text
    seen.names.clear()
    assert http.post("/v1/intents", json=intent_body(t, 2)).status_code == 201
    assert [n for n in seen.names if n.startswith(("intake", "create"))] == ["create_intent"]
    publish_policy(elsewhere, clock, "strict-2", budget=2)
    publish_revision(elsewhere, "Spot in {{ class_name }} until {{ deadline }}.")
    third = http.post("/v1/intents", json=intent_body(t, 3))
    assert third.status_code == 201, third.text
    assert (third.json()["policy_version"], third.json()["template_revision"]) == ("strict-2", 2)
    replay = http.post("/v1/intents", json=replayed)
    assert replay.status_code == 200 and replay.json()["id"] == first.json()["id"]
    changed = {**replayed, "variables": {"class_name": "Yoga", "deadline": "9"}}
    assert http.post("/v1/intents", json=changed).status_code == 409
