"""Suppressions reviewed and lifted (issue #37, item 5; DESIGN invariant 12):
`GET /v1/suppressions`, `DELETE /v1/suppressions/{id}`, `Tidings.list_suppressions`
and `lift_suppression`, `tidings suppressions list|lift`. Each suppression
is listed with its evidence and the destination's keyed hash, never the
destination; a lift records who, when and why; a tenant never sees or
lifts another's; the rows the old rule wrote (a Postmark ErrorCode 300 as
`invalid`, a `Blocked` bounce as `hard_bounce`) are found and lifted."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.types.json import Jsonb
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET, publish_example_policy
from tidings import IntentState, ManualClock, Tidings
from tidings.cli.main import app
from tidings.domain.errors import AlreadyLifted, InvalidInput, NotFound
from tidings.store import contacts
from tidings.store.migrate import _apply_if_pending, available, migrate

from .api_support import EMAIL, PHONE, TENANT, auth, client, is_problem, new_key
from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker
from .test_refusals import RECIPIENT_LEVEL, RefusesOnce


def _old_rule_rows(t: Tidings) -> tuple[str, str]:
    """What the rule before issue 37 wrote: a send-time ErrorCode 300 as an
    `invalid` suppression with no evidence, and a Postmark `Blocked` bounce
    receipt as a `hard_bounce`. Returns the two destinations' hashes."""
    phone = t.vault.reference("sms", PHONE)
    mail = t.vault.reference("email", EMAIL.lower())
    now = t.clock.now()
    t._ensure_tenant()
    with t.db.transaction() as conn:
        contacts.suppress(conn, t.tenant, "sms", phone, "invalid", now)
        evidence = contacts.Evidence("postmark", None, 1, "Bounce:Blocked")
        contacts.block_observed(conn, t.tenant, "email", mail, "hard_bounce", evidence, now)
    return phone, mail


def _items(answer: Any) -> list[dict[str, Any]]:
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def test_a_lifted_address_is_sent_to_again(tidings: Tidings, clock: ManualClock) -> None:
    # An unrecognised number suppresses it (invalid), with its evidence.
    make, _ = RECIPIENT_LEVEL["vonage 6 (unrecognised number prefix)"]
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core, adapter=RefusesOnce(core, make()))
    first = offer(tidings, 1)
    w.dispatch_once()
    assert tidings.get(first.id).state is IntentState.FAILED
    page = tidings.list_suppressions(reason="invalid")
    [found] = page.items
    assert page.next_cursor is None
    assert (found.channel, found.reason, found.state) == ("sms", "invalid", "active")
    # The send-time rejection keeps its evidence now: which provider and attempt.
    assert (found.intent_id, found.attempt_n) == (first.id, 1)
    assert found.provider is not None and found.raw_status == "INVALID_DESTINATION"
    assert found.recipient_ref == "member-1801"
    assert found.destination_hash == tidings.vault.reference("sms", PHONE)

    lifted = tidings.lift_suppression(found.id, reason="number ported back", actor="ops:ana")
    assert (lifted.state, lifted.lifted_by) == ("lifted", "ops:ana")
    assert lifted.lift_reason == "number ported back" and lifted.lifted_at == clock.now()
    assert tidings.list_suppressions().items == ()
    assert [s.id for s in tidings.list_suppressions(lifted=True).items] == [found.id]

    third = offer(tidings, 3)  # the same number, another member
    w.dispatch_once()
    assert tidings.get(third.id).state is IntentState.ACCEPTED
    assert len(sends(core)) == 1


def test_the_old_rules_rows_are_found_by_filter_and_lifted(
    api: TestClient, tidings: Tidings, clock: ManualClock
) -> None:
    acme = tidings.for_tenant(TENANT)
    _old_rule_rows(acme)
    clock.advance(seconds=60)
    later = clock.now()
    acme.suppress("sms", "+14155550199", reason="operator")
    everything = _items(api.get("/v1/suppressions"))
    assert everything[0]["reason"] == "operator"  # newest first; the other two tie
    assert {s["reason"] for s in everything[1:]} == {"hard_bounce", "invalid"}
    [invalid] = _items(api.get("/v1/suppressions", params={"reason": "invalid"}))
    assert invalid["provider"] is None and invalid["intent_id"] is None  # no evidence kept then
    [blocked] = _items(api.get("/v1/suppressions", params={"provider": "postmark"}))
    assert (blocked["reason"], blocked["raw_status"]) == ("hard_bounce", "Bounce:Blocked")
    assert blocked["channel"] == "email" and blocked["state"] == "active"
    recent = _items(api.get("/v1/suppressions", params={"since": later.isoformat()}))
    assert [s["reason"] for s in recent] == ["operator"]
    text = api.get("/v1/suppressions").text
    assert PHONE not in text and EMAIL.lower() not in text.lower()  # hashes only

    for row in (invalid, blocked):
        gone = api.delete(f"/v1/suppressions/{row['id']}", params={"reason": "issue 37 wrong rule"})
        assert gone.status_code == 200, gone.text
        assert gone.json()["state"] == "lifted" and gone.json()["lifted_by"].startswith("api:")
        assert gone.json()["lift_reason"] == "issue 37 wrong rule"
    assert [s["reason"] for s in _items(api.get("/v1/suppressions"))] == ["operator"]
    shown = api.get(f"/v1/suppressions/{blocked['id']}")
    assert shown.status_code == 200 and shown.json()["state"] == "lifted"
    lifted = _items(api.get("/v1/suppressions", params={"lifted": "true"}))
    assert {s["id"] for s in lifted} == {invalid["id"], blocked["id"]}

    again = api.delete(f"/v1/suppressions/{blocked['id']}", params={"reason": "twice"})
    problem = is_problem(again, 409, "ALREADY_LIFTED")
    assert problem["state"] == "lifted" and problem["lifted_at"]


def test_a_lift_needs_a_reason_the_admin_scope_and_a_known_id(
    api: TestClient, tidings: Tidings
) -> None:
    acme = tidings.for_tenant(TENANT)
    _old_rule_rows(acme)
    [row, _] = _items(api.get("/v1/suppressions"))
    path = f"/v1/suppressions/{row['id']}"
    is_problem(api.delete(path, params={}), 422, "INVALID_INPUT")
    is_problem(api.delete(path, params={"reason": ""}), 422, "INVALID_INPUT")
    unknown = "/v1/suppressions/01900000-0000-7000-8000-000000000000"
    is_problem(api.delete(unknown, params={"reason": "x"}), 404, "NOT_FOUND")
    is_problem(api.get(unknown), 404, "NOT_FOUND")
    reader = client(tidings)
    reader.headers.update(auth(new_key(tidings, TENANT, ["read"])))
    assert len(_items(reader.get("/v1/suppressions"))) == 2  # reading needs read
    is_problem(reader.delete(path, params={"reason": "x"}), 403, "FORBIDDEN")
    assert len(_items(api.get("/v1/suppressions"))) == 2


def test_a_tenant_never_sees_or_lifts_anothers(api: TestClient, tidings: Tidings) -> None:
    _old_rule_rows(tidings.for_tenant(TENANT))
    [row, _] = _items(api.get("/v1/suppressions"))
    other = client(tidings)
    other.headers.update(auth(new_key(tidings, "globex")))
    assert _items(other.get("/v1/suppressions")) == []
    path = f"/v1/suppressions/{row['id']}"
    is_problem(other.get(path), 404, "NOT_FOUND")
    is_problem(other.delete(path, params={"reason": "x"}), 404, "NOT_FOUND")
    assert api.get(path).json()["state"] == "active"
    with pytest.raises(NotFound):
        tidings.for_tenant("globex").lift_suppression(row["id"], reason="x")


def test_pages_follow_the_cursor(tidings: Tidings, clock: ManualClock) -> None:
    for n in range(5):
        tidings.suppress("sms", f"+1415555010{n}", reason="operator")
        clock.advance(seconds=1 if n % 2 else 0)
    seen: list[Any] = []
    cursor = None
    while True:
        page = tidings.list_suppressions(limit=2, cursor=cursor)
        seen += [s.id for s in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 5
    with pytest.raises(InvalidInput):
        tidings.list_suppressions(reason="spam")
    with pytest.raises(AlreadyLifted):
        tidings.lift_suppression(seen[0], reason="a")
        tidings.lift_suppression(seen[0], reason="b")


def test_the_cli_lists_and_lifts(
    tidings: Tidings, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _old_rule_rows(tidings)
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    listed = CliRunner().invoke(app, ["suppressions", "list", "--reason", "invalid", "--json"])
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.output)["items"]
    plain = CliRunner().invoke(app, ["suppressions", "list", "--provider", "postmark"])
    assert (
        plain.exit_code == 0 and "hard_bounce" in plain.output and "Bounce:Blocked" in plain.output
    )
    lift = ["suppressions", "lift", row["id"], "--reason", "wrong rule (issue 37)"]
    done = CliRunner().invoke(app, lift)
    assert done.exit_code == 0, done.output
    [gone] = tidings.list_suppressions(lifted=True).items
    assert gone.lifted_by == "cli" and gone.lift_reason == "wrong rule (issue 37)"
    shown = CliRunner().invoke(app, ["suppressions", "show", row["id"], "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["state"] == "lifted"
    twice = CliRunner().invoke(app, lift)
    assert twice.exit_code == 1 and "already lifted" in twice.output


def test_the_upgrade_finds_the_evidence_of_old_send_time_suppressions(
    fresh_db: str, clock: ManualClock
) -> None:
    # A database without 0035, whose send-time rejection wrote an `invalid`
    # suppression without evidence, as the old rule did. The later
    # migrations are applied (today's code needs their columns to send);
    # none of them touches suppressions.
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        for migration in available():
            if migration.version != 35:
                with conn.transaction():
                    _apply_if_pending(conn, migration)
    t = Tidings(fresh_db, clock=clock, secret_key=TEST_SECRET)
    try:
        publish_example_policy(t)
        publish_offer_template(t)
        make, _ = RECIPIENT_LEVEL["vonage 6 (unrecognised number prefix)"]
        core = simulator(clock)
        first = offer(t, 1)
        worker(t, core, adapter=RefusesOnce(core, make())).dispatch_once()
        with t.db.transaction() as conn:
            conn.execute(
                "UPDATE suppressions SET provider = NULL, intent_id = NULL,"
                " attempt_n = NULL, raw_status = NULL"
            )
            # A Postmark `Blocked` bounce receipt, kept as a hard bounce whose
            # raw status said only `Bounce`.
            conn.execute(
                "INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id,"
                " attempt_n, status, code, raw_status, source, received_at, raw)"
                " VALUES (%s, 'postmark', 'b1', %s, 1, 'failed', 'BOUNCED', 'Bounce',"
                " 'webhook', now(), %s)",
                (t.tenant, first.id, Jsonb({"RecordType": "Bounce", "Type": "Blocked"})),
            )
            evidence = contacts.Evidence("postmark", first.id, 1, "Bounce")
            now = clock.now()
            contacts.block_observed(conn, t.tenant, "email", "eh1", "hard_bounce", evidence, now)
        migrate(fresh_db)  # 0035
        [found] = t.list_suppressions(reason="invalid").items
        assert (found.intent_id, found.attempt_n, found.provider) == (first.id, 1, "simulator")
        assert found.raw_status  # the provider's answer the attempt kept
        [blocked] = t.list_suppressions(provider="postmark").items
        assert blocked.raw_status == "Bounce:Blocked"
    finally:
        t.close()
