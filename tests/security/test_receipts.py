"""Receipts across tenants (issue #20, item 2; DESIGN.md invariants 6 and 11).

Two tenants may choose the same idempotency key. What a provider sees (the
attempt's reference and idempotency key) used to be `<that key>:attempt:n`,
so both tenants' attempts carried the same reference: the simulator took
b's send for a replay of a's, and b's `failed/CARRIER_FILTERED` receipt was
stored on a's intent while b's intent never got one. Each test here
reproduces that attack and shows each tenant gets only its own receipts.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import psycopg
import pytest
from harness.processes import simulator, start_api, start_worker, wait_http, wait_until

from tests.conftest import TEST_SECRET, with_example_policy
from tests.integration.api_support import auth, client, intent_body, new_key, publish_offer
from tests.lanes import starts_processes
from tests.providers.test_twilio import status_callback
from tests.providers.twilio_peer import (
    CALLBACK,
    TOKEN,
    TwilioFake,
    make_adapter,
    spec,  # noqa: F401  (the fixture the Twilio fake is built from)
    twilio_signature,
)
from tidings import ManualClock, Tidings
from tidings.api.settings import ApiSettings
from tidings.cli.devstack import free_port
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.domain.keys import attempt_key

SHARED_KEY = "order-42:offer"  # both tenants chose it
SHARED_KEYS = [f"order-{n}:offer" for n in range(4)]
WEBHOOK_SECRET = "receipts-test-webhook-secret"
DELIVERED_PHONE = "+14155550123"
FILTERED_PHONE = "+14155550002"  # the simulator fails it later: CARRIER_FILTERED


def _rows(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, params).fetchall()


def _settled(db_url: str, tenant: str) -> list[tuple[Any, ...]] | None:
    """(intent state, attempt state, code) of each of the tenant's intents, once all settled."""
    rows = _rows(
        db_url,
        "SELECT i.state, a.state, a.code FROM intents i JOIN attempts a"
        " ON a.tenant_id = i.tenant_id AND a.intent_id = i.id WHERE i.tenant_id = %s",
        tenant,
    )
    done = len(rows) == len(SHARED_KEYS) and all(r[0] in ("delivered", "failed") for r in rows)
    return rows if done else None


@pytest.fixture
@starts_processes
def api(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """`tidings serve` and the simulator process, receipts signed and posted to the API."""
    port = free_port()
    api_url = f"http://127.0.0.1:{port}"
    with simulator(
        webhook_url=f"{api_url}/v1/webhooks/simulator",
        webhook_secret=WEBHOOK_SECRET,
        receipt_delay_ms=50,
    ) as sim:
        monkeypatch.setenv("TIDINGS_SIMULATOR_URL", sim)
        monkeypatch.setenv("TIDINGS_SIMULATOR_WEBHOOK_SECRET", WEBHOOK_SECRET)
        proc = start_api(db_url, tmp_path, port)
        try:
            wait_http(f"{api_url}/healthz", proc)
            yield api_url, sim
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_two_tenants_with_one_key_each_receive_only_their_own_receipts(
    db_url: str, tmp_path: Path, api: tuple[str, str]
) -> None:
    api_url, sim = api
    with with_example_policy(Tidings(db_url, secret_key=TEST_SECRET)) as t:
        keys = {}
        for tenant in ("tenant-a", "tenant-b"):
            publish_offer(t, tenant)
            keys[tenant] = auth(new_key(t, tenant))
        phones = {"tenant-a": DELIVERED_PHONE, "tenant-b": FILTERED_PHONE}
        for n, key in enumerate(SHARED_KEYS):
            for tenant, phone in phones.items():
                body = intent_body(t, n, idempotency_key=key)
                body["recipient"]["phone"] = phone
                created = httpx.post(f"{api_url}/v1/intents", json=body, headers=keys[tenant])
                assert created.status_code == 201, created.text
    worker = start_worker(db_url, tmp_path, sim)
    try:
        a = wait_until(lambda: _settled(db_url, "tenant-a"), timeout=20, what="a's receipts")
        b = wait_until(lambda: _settled(db_url, "tenant-b"), timeout=20, what="b's receipts")
    finally:
        worker.terminate()
        worker.wait(timeout=10)
    assert a == [("delivered", "delivered", None)] * len(SHARED_KEYS)
    assert b == [("failed", "failed", "CARRIER_FILTERED")] * len(SHARED_KEYS)
    # One message per intent went out: no send was taken for the other tenant's.
    assert len(httpx.get(f"{sim}/_ledger", timeout=10).json()) == 2 * len(SHARED_KEYS)
    # Every stored receipt sits on the attempt whose message it reports.
    misplaced = _rows(
        db_url,
        "SELECT o.id FROM observations o JOIN attempts a"
        " ON a.tenant_id = o.tenant_id AND a.intent_id = o.intent_id AND a.n = o.attempt_n"
        " WHERE o.provider_message_id IS DISTINCT FROM a.provider_message_id",
    )
    assert misplaced == []
    assert _rows(db_url, "SELECT count(*) FROM unmatched_observations") == [(0,)]


# --- the same, with the receipts a provider really sends --------------------


def _twilio_callback(reference: str, sid: str, status: str) -> tuple[str, dict[str, str], str]:
    """A Twilio status callback to the URL we gave it, signed with the account's token."""
    url = f"{CALLBACK}?{urlencode({'tidings_attempt': reference})}"
    params = status_callback(sid, status)
    headers = {
        "X-Twilio-Signature": twilio_signature(TOKEN, url, params),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    return url, headers, urlencode(params)


def test_twilio_receipts_naming_only_our_reference_stay_with_their_tenant(
    tidings: Tidings,
    clock: ManualClock,
    spec: dict[str, Any],  # noqa: F811
) -> None:
    """Both sends time out (Twilio took them; we never learned a SID), so the
    status callbacks can be matched by our reference alone."""
    fake = TwilioFake(spec)
    adapter = make_adapter(fake)
    http = client(tidings, {"twilio": adapter})
    http.app.state.api_settings = ApiSettings(public_base_url=_origin(CALLBACK))
    ids = {}
    for tenant, phone in (("tenant-a", "+14155551111"), ("tenant-b", "+14155552222")):
        publish_offer(tidings, tenant)
        fake.outcomes[phone] = "timeout"
        body = intent_body(tidings, idempotency_key=SHARED_KEY)
        body["recipient"]["phone"] = phone
        answer = http.post("/v1/intents", json=body, headers=auth(new_key(tidings, tenant)))
        assert answer.status_code in (200, 201), answer.text
        ids[tenant] = answer.json()["id"]
    Worker(tidings.runtime, {"sms": adapter}, config=WorkerConfig(seed=7)).dispatch_once()
    references = [_reference(request) for request in fake.requests]
    assert sorted(references) == sorted(attempt_key(i, 1) for i in ids.values())
    b_reference = attempt_key(ids["tenant-b"], 1)
    url, headers, body = _twilio_callback(b_reference, "SM" + "b" * 32, "undelivered")
    parts = urlsplit(url)
    answer = http.post(f"{parts.path}?{parts.query}", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    attempts = {
        tenant: tidings.for_tenant(tenant).get(intent_id).attempts[0]
        for tenant, intent_id in ids.items()
    }
    assert attempts["tenant-b"].state.value == "undelivered"
    assert attempts["tenant-a"].state.value in ("unknown", "sending")


def _reference(request: httpx.Request) -> str:
    form = parse_qs(request.content.decode())
    return parse_qs(urlsplit(form["StatusCallback"][0]).query)["tidings_attempt"][0]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def test_a_key_from_before_shared_by_two_tenants_matches_neither(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    """Rows written before keys came from intent ids keep their old keys; a
    receipt naming one that two tenants share must not pick either."""
    from tidings.dispatch.observe import apply_observation
    from tidings.providers.outcomes import Observation, ObservedStatus

    for tenant in ("tenant-a", "tenant-b"):
        publish_offer(tidings, tenant)
        body = intent_body(tidings, idempotency_key=SHARED_KEY)
        http = client(tidings)
        http.post("/v1/intents", json=body, headers=auth(new_key(tidings, tenant)))
    legacy = f"{SHARED_KEY}:attempt:1"
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state,"
            " provider, created_at)"
            " SELECT tenant_id, id, 1, %s, channel, 'unknown', 'simulator', now() FROM intents",
            (legacy,),
        )
    observation = Observation(
        provider="simulator",
        provider_message_id=None,
        attempt_key=legacy,
        status=ObservedStatus.failed,
        code="CARRIER_FILTERED",
        raw_status="failed",
        occurred_at=clock.now() + timedelta(seconds=1),
        dedupe_key="legacy-1",
    )
    with tidings.db.transaction() as conn:
        assert apply_observation(conn, observation, "webhook", clock.now()) == "unmatched"
    assert _rows(db_url, "SELECT DISTINCT state FROM attempts") == [("unknown",)]


def test_the_reference_travels_whole_in_every_providers_field() -> None:
    """Each adapter's correlation field gives our reference back unchanged,
    so receipts keep matching by it (Twilio's URL, SendGrid's custom_args and
    the simulator carry it as is)."""
    from tidings.providers.correlation import carry, chunk, recover, unchunk
    from tidings.providers.ses import _attempt_key as ses_key
    from tidings.providers.ses import tag_value
    from tidings.providers.twilio import with_query

    reference = attempt_key("019b8e07-4600-73ca-905c-84864b1315d0", 12)
    assert ses_key({"tidings_attempt": [tag_value(reference)]}) == reference
    assert unchunk(chunk(reference, "tidings_key", 80, 4), "tidings_key") == reference  # Postmark
    assert recover(carry(reference, 100)) == reference  # Vonage client-ref, AWS Context
    callback = with_query("https://hooks.example/v1/webhooks/twilio", "tidings_attempt", reference)
    assert parse_qs(urlsplit(callback).query)["tidings_attempt"] == [reference]


def test_a_lookup_made_for_one_tenant_settles_nobody_else(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    """The reconciler looks b's attempt up by its key; under a key from
    before (shared with a) the provider may answer with a's message. What
    comes back may settle only b's attempts."""
    from tidings.dispatch.observe import apply_observation
    from tidings.providers.outcomes import Observation, ObservedStatus

    for tenant in ("tenant-a", "tenant-b"):
        publish_offer(tidings, tenant)
        client(tidings).post(
            "/v1/intents",
            json=intent_body(tidings, idempotency_key=SHARED_KEY),
            headers=auth(new_key(tidings, tenant)),
        )
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state,"
            " provider, provider_message_id, created_at)"
            " SELECT tenant_id, id, 1, %s, channel, 'accepted', 'simulator',"
            " 'SIM-' || tenant_id, now() FROM intents",
            (f"{SHARED_KEY}:attempt:1",),
        )
    a_message = Observation(
        provider="simulator",
        provider_message_id="SIM-tenant-a",
        attempt_key=f"{SHARED_KEY}:attempt:1",
        status=ObservedStatus.failed,
        code="CARRIER_FILTERED",
        raw_status="failed",
        occurred_at=clock.now(),
        dedupe_key="lookup-1",
    )
    with tidings.db.transaction() as conn:
        effect = apply_observation(conn, a_message, "lookup", clock.now(), tenant_hint="tenant-b")
    assert effect == "unmatched"
    assert _rows(db_url, "SELECT DISTINCT state FROM attempts") == [("accepted",)]
