"""Provider webhooks cannot be forged, and refuse with a 4xx (issue #20, items 9 and 11).

Each test plays an attacker (or a provider we are not configured for)
against the real API app and a real adapter: SNS messages are signed by a
local RSA key whose certificate the verifier fetches (tests/providers/
peer_support.SnsSigner), Twilio's and the simulator's with their published
algorithms.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from harness.processes import start_api, wait_http

from tests.integration.api_support import client, receipts_stored
from tests.providers.peer_support import TOPIC_ARN, SnsSigner
from tests.providers.test_aws_sms import sms_client, sms_event
from tidings import Tidings
from tidings.api.settings import ApiSettings
from tidings.cli.devstack import free_port
from tidings.platform.settings import Settings
from tidings.providers import routing, sns_signature
from tidings.providers.aws_sms import AwsSmsAdapter
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import InvalidSignature
from tidings.providers.settings import build
from tidings.providers.simulator import DEFAULT_WEBHOOK_SECRET
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.receipts import render
from tidings.providers.sns_signature import SnsVerifier

SECRET = "provider-webhooks-test-secret"
PHONE = "+14155550123"


def _post(http: Any, provider: str, body: bytes, headers: dict[str, Any], query: str = "") -> Any:
    return http.post(f"/v1/webhooks/{provider}{query}", content=body, headers=headers)


def _assert_problem(answer: Any, status: int) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")


# --- SNS (AWS End User Messaging SMS, and SES through the same verifier) ----


def _aws_sms(signer: SnsSigner, fetch: Any = None, **verifier: Any) -> AwsSmsAdapter:
    checks = SnsVerifier(cert_fetcher=fetch or signer.fetch, **verifier)
    return AwsSmsAdapter(sms_client(), sns_verifier=checks)


def _sns_post(http: Any, doc: dict[str, Any]) -> Any:
    return _post(http, "aws_sms", json.dumps(doc).encode(), {"Content-Type": "text/plain"})


def _event(signer: SnsSigner, **options: Any) -> dict[str, Any]:
    return signer.message(sms_event("m-1", "tdg:x:1", "TEXT_DELIVERED"), **options)


def test_sns_without_pinned_topics_accepts_nothing(tidings: Tidings, db_url: str) -> None:
    signer = SnsSigner()
    http = client(tidings, {"aws_sms": _aws_sms(signer)})
    # Genuinely signed by SNS, but for any topic of any AWS account.
    answer = _sns_post(http, _event(signer, topic_arn="arn:aws:sns:us-east-1:666:attacker"))
    _assert_problem(answer, 404)
    assert receipts_stored(db_url) == 0


def test_sns_from_a_topic_not_pinned_is_refused(tidings: Tidings, db_url: str) -> None:
    signer = SnsSigner()
    http = client(tidings, {"aws_sms": _aws_sms(signer, topic_arns=[TOPIC_ARN])})
    _assert_problem(_sns_post(http, _event(signer, topic_arn=TOPIC_ARN + "-other")), 401)
    assert _sns_post(http, _event(signer)).status_code == 200
    assert receipts_stored(db_url) == 1


@pytest.mark.parametrize("age", [timedelta(hours=2), -timedelta(hours=1)])
def test_sns_messages_out_of_their_time_are_refused(
    tidings: Tidings, db_url: str, age: timedelta
) -> None:
    """A captured message replayed later (or one stamped ahead) is refused,
    though its signature is genuine."""
    signer = SnsSigner()
    http = client(tidings, {"aws_sms": _aws_sms(signer, topic_arns=[TOPIC_ARN])})
    stamp = datetime.now(UTC) - age
    _assert_problem(_sns_post(http, _event(signer, timestamp=stamp)), 401)
    assert receipts_stored(db_url) == 0


def test_sns_certificates_only_from_sns_endpoints(tidings: Tidings, db_url: str) -> None:
    """An S3 bucket is a host under amazonaws.com that anyone can serve a
    certificate from, issued to any name they like: it was fetched, and the
    attacker's own signature accepted."""
    attacker = SnsSigner(common_name="sns.amazonaws.com")
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        return attacker.cert_pem

    http = client(tidings, {"aws_sms": _aws_sms(attacker, fetch, topic_arns=[TOPIC_ARN])})
    for url in (
        "https://sns.attacker-bucket.s3.amazonaws.com/SimpleNotificationService-1.pem",
        "https://sns.us-east-1.amazonaws.com.attacker.test/SimpleNotificationService-1.pem",
        "https://sns.s3.us-east-1.amazonaws.com/x/SimpleNotificationService-1.pem",
    ):
        _assert_problem(_sns_post(http, _event(attacker, cert_url=url)), 401)
    assert fetched == [] and receipts_stored(db_url) == 0


def test_sns_certificate_out_of_reach_is_a_5xx_so_sns_retries(tidings: Tidings) -> None:
    signer = SnsSigner()

    def unreachable(url: str) -> bytes:
        raise httpx.ConnectError("certificate host unreachable")

    http = client(tidings, {"aws_sms": _aws_sms(signer, unreachable, topic_arns=[TOPIC_ARN])})
    answer = _sns_post(http, _event(signer))
    _assert_problem(answer, 503)
    assert answer.json()["code"] == "UNAVAILABLE"


def test_sns_settings_pin_topics_and_bound_age() -> None:
    """TIDINGS_<NAME>_SNS_TOPIC_ARNS and _SNS_MAX_AGE_SECONDS, as each adapter reads
    them; both checks come before any certificate is fetched."""
    signer = SnsSigner()
    verifier = sns_signature.sns_verifier_from(
        {"sns_topic_arns": f"{TOPIC_ARN}, arn:aws:sns:eu-west-1:1:b", "sns_max_age_seconds": "60"},
        "aws_sms",
    )
    old = _event(signer, timestamp=datetime.now(UTC) - timedelta(seconds=120))
    with pytest.raises(InvalidSignature, match="too old"):
        verifier.verify(json.dumps(old).encode())
    stranger = _event(signer, topic_arn="arn:aws:sns:us-east-1:666:attacker")
    with pytest.raises(InvalidSignature, match="unexpected topic"):
        verifier.verify(json.dumps(stranger).encode())


@pytest.mark.parametrize("provider", ["ses", "aws_sms"])
def test_sns_adapters_built_without_topics_refuse_every_event(
    tidings: Tidings, db_url: str, provider: str
) -> None:
    aws = {
        "region": "us-east-1",
        "access_key_id": "A",
        "secret_access_key": "S",
        "from": "a@b.test",
    }
    http = client(tidings, {provider: build(provider, aws)})
    signer = SnsSigner()
    answer = _post(http, provider, json.dumps(_event(signer)).encode(), {})
    _assert_problem(answer, 404)
    assert signer.fetched == [] and receipts_stored(db_url) == 0


# --- the simulator's webhook secret -------------------------------------------


def _forged_receipt() -> tuple[dict[str, str], bytes]:
    """A receipt signed with the simulator's well-known development secret."""
    event = {
        "event_id": "forged-1",
        "message_id": "SIM-victim",
        "idempotency_key": "tdg:00000000-0000-7000-8000-000000000000:1",
        "status": "failed",
        "code": "CARRIER_FILTERED",
        "occurred_at": datetime.now(UTC).isoformat(),
    }
    return render(event, DEFAULT_WEBHOOK_SECRET, int(time.time()))


def test_tidings_serve_off_loopback_refuses_receipts_signed_with_the_default_secret(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spawns: None
) -> None:
    monkeypatch.setenv("TIDINGS_SIMULATOR_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("TIDINGS_SIMULATOR_WEBHOOK_SECRET", raising=False)
    port = free_port()
    proc = start_api(db_url, tmp_path, port, "--host", "0.0.0.0")
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        headers, body = _forged_receipt()
        url = f"http://127.0.0.1:{port}/v1/webhooks/simulator"
        answer = httpx.post(url, content=body, headers=headers, timeout=10)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    _assert_problem(answer, 404)
    assert receipts_stored(db_url) == 0


def test_the_default_secret_only_in_loopback_development() -> None:
    local = Settings(simulator_url="http://127.0.0.1:8099")
    remote = Settings(simulator_url="http://simulator.internal:8099")
    assert routing.simulator_webhook_secret(local, "127.0.0.1") == DEFAULT_WEBHOOK_SECRET
    assert routing.simulator_webhook_secret(local, "::1") == DEFAULT_WEBHOOK_SECRET
    assert routing.simulator_webhook_secret(local, "0.0.0.0") is None
    assert routing.simulator_webhook_secret(local, None) is None
    assert routing.simulator_webhook_secret(remote, "127.0.0.1") is None
    configured = Settings(
        simulator_url="http://simulator.internal:8099", simulator_webhook_secret=SECRET
    )
    assert routing.simulator_webhook_secret(configured, "0.0.0.0") == SECRET
    [adapter] = {id(a): a for a in routing.adapters_from_settings(remote).values()}.values()
    assert isinstance(adapter, SimulatorAdapter)


def test_an_api_with_no_provider_says_its_webhooks_will_404(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("TIDINGS_SMS_PROVIDER", "TIDINGS_EMAIL_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    with caplog.at_level("WARNING", logger="tidings.webhooks"):
        assert routing.webhook_adapters(Settings(simulator_url=None), serving_host="::1") == {}
    [record] = caplog.records
    assert record.getMessage() == "no provider configured; provider webhooks will answer 404"
    assert "TIDINGS_SIMULATOR_URL" in record.__dict__["why"]
    caplog.clear()
    local = Settings(simulator_url="http://127.0.0.1:8099")
    assert set(routing.webhook_adapters(local, serving_host="127.0.0.1")) == {"simulator"}
    assert not caplog.records


def test_devstack_signs_with_a_fresh_secret_per_run() -> None:
    from tidings.cli.devstack import DevStack

    first, second = DevStack(Settings()), DevStack(Settings())
    assert DEFAULT_WEBHOOK_SECRET not in (first.secret, second.secret)
    assert first.secret != second.secret and len(first.secret) >= 32


# --- inbound messages: the tenant is configured, never requested --------------


def _inbound(http: Any, body: dict[str, str], query: str = "", secret: str = SECRET) -> Any:
    headers, raw = render(body, secret, int(time.time()))
    return http.post(f"/v1/inbound/simulator{query}", content=raw, headers=headers)


def _opt_outs(db_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT tenant_id FROM opt_outs ORDER BY 1").fetchall()


def _tenants(db_url: str) -> list[str]:
    with psycopg.connect(db_url) as conn:
        return [r[0] for r in conn.execute("SELECT tenant_id FROM tenants ORDER BY 1")]


def test_an_inbound_stop_cannot_pick_its_tenant(tidings: Tidings, db_url: str) -> None:
    """The server acts for its own tenant ('default' here); a STOP naming
    another tenant in its URL opted that tenant's recipient out, and named a
    tenant that did not exist into being."""
    http = client(tidings, {"simulator": SimulatorAdapter("http://127.0.0.1:9", SECRET)})
    tidings.publish_template("t", channel="sms", body="hi")
    tidings.for_tenant("victim").publish_template("t", channel="sms", body="hi")
    before = _tenants(db_url)
    stop = {"from": PHONE, "text": "STOP"}
    for query in ("?tenant=victim", "?tenant=brand-new-tenant"):
        _assert_problem(_inbound(http, stop, query), 400)
    assert _opt_outs(db_url) == [] and _tenants(db_url) == before
    assert _inbound(http, stop).status_code == 200
    assert _opt_outs(db_url) == [("default",)]


def test_the_inbound_tenant_is_configured(tidings: Tidings, db_url: str) -> None:
    http = client(tidings, {"simulator": SimulatorAdapter("http://127.0.0.1:9", SECRET)})
    http.app.state.api_settings = ApiSettings(inbound_tenant="studio")
    tidings.for_tenant("studio").publish_template("t", channel="sms", body="hi")
    assert _inbound(http, {"from": PHONE, "text": "STOP"}).status_code == 200
    assert _opt_outs(db_url) == [("studio",)]


def test_an_inbound_message_never_creates_a_tenant(tidings: Tidings, db_url: str) -> None:
    http = client(tidings, {"simulator": SimulatorAdapter("http://127.0.0.1:9", SECRET)})
    http.app.state.api_settings = ApiSettings(inbound_tenant="nobody-yet")
    _assert_problem(_inbound(http, {"from": PHONE, "text": "STOP"}), 404)
    assert "nobody-yet" not in _tenants(db_url) and _opt_outs(db_url) == []


def test_inbound_with_no_secret_configured_is_refused(tidings: Tidings, db_url: str) -> None:
    http = client(tidings, {"simulator": SimulatorAdapter("http://127.0.0.1:9", None)})
    stop = {"from": PHONE, "text": "STOP"}
    _assert_problem(_inbound(http, stop, secret=DEFAULT_WEBHOOK_SECRET), 404)
    assert _opt_outs(db_url) == []


# --- 500s that are the sender's fault: 4xx -------------------------------------


def _twilio() -> ProviderAdapter:
    return build(
        "twilio",
        {"account_sid": "AC" + "a" * 32, "auth_token": "token-0123456789", "from": "+15550009999"},
    )


def _vonage() -> ProviderAdapter:
    return build(
        "vonage",
        {
            "api_key": "k",
            "api_secret": "s",
            "from": "tidings",
            "signature_secret": "vonage-signature-secret",
            "signature_method": "sha256",
        },
    )


def _sendgrid() -> ProviderAdapter:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return build(
        "sendgrid",
        {
            "api_key": "SG.x",
            "from": "a@b.test",
            "webhook_public_key": base64.b64encode(der).decode(),
        },
    )


def _postmark() -> ProviderAdapter:
    return build(
        "postmark",
        {
            "server_token": "t",
            "from": "a@b.test",
            "webhook_username": "u",
            "webhook_password": "p",
        },
    )


NON_ASCII = "é€✓".encode()


@pytest.mark.parametrize(
    ("provider", "make", "headers", "body"),
    [
        ("twilio", _twilio, {"X-Twilio-Signature": NON_ASCII}, b"MessageSid=SM1"),
        ("simulator", lambda: SimulatorAdapter("http://x", SECRET),
         {"X-Simulator-Signature": b"t=1,v1=" + NON_ASCII}, b"{}"),
        ("sendgrid", _sendgrid,
         {"X-Twilio-Email-Event-Webhook-Signature": NON_ASCII,
          "X-Twilio-Email-Event-Webhook-Timestamp": NON_ASCII}, b"[]"),
        ("postmark", _postmark, {"Authorization": b"Basic " + NON_ASCII}, b"{}"),
    ],
)  # fmt: skip
def test_a_non_ascii_signature_is_refused_not_a_500(
    tidings: Tidings, provider: str, make: Any, headers: dict[str, bytes], body: bytes
) -> None:
    http = client(tidings, {provider: make()})
    _assert_problem(_post(http, provider, body, headers), 401)


def test_a_non_ascii_vonage_signature_is_refused_not_a_500(tidings: Tidings) -> None:
    http = client(tidings, {"vonage": _vonage()})
    query = f"?messageId=1&status=delivered&timestamp={int(time.time())}&sig=%C3%A9%E2%9C%93"
    _assert_problem(_post(http, "vonage", b"", {}, query), 401)


@pytest.mark.parametrize(
    "occurred_at", ["yesterday", "2026-13-45T99:00:00", "2026-01-01T00:00:00", 7]
)
def test_a_signed_simulator_event_with_a_bad_time_is_a_400(
    tidings: Tidings, db_url: str, occurred_at: Any
) -> None:
    http = client(tidings, {"simulator": SimulatorAdapter("http://x", SECRET)})
    event = {
        "event_id": "e1",
        "message_id": "SIM1",
        "status": "delivered",
        "occurred_at": occurred_at,
    }
    headers, body = render(event, SECRET, int(time.time()))
    _assert_problem(_post(http, "simulator", body, headers), 400)
    assert receipts_stored(db_url) == 0


@pytest.mark.parametrize("field", ["message_id", "idempotency_key"])
def test_a_signed_simulator_event_with_a_bad_reference_is_a_400(
    tidings: Tidings, db_url: str, field: str
) -> None:
    http = client(tidings, {"simulator": SimulatorAdapter("http://x", SECRET)})
    event = {"event_id": "e1", "message_id": "SIM1", "status": "delivered", field: {"x": [1]}}
    headers, body = render(event, SECRET, int(time.time()))
    _assert_problem(_post(http, "simulator", body, headers), 400)
    assert receipts_stored(db_url) == 0


@pytest.mark.parametrize(
    ("provider", "settings"),
    [
        ("smtp", {"host": "127.0.0.1", "from": "a@b.test"}),
        ("infrai", {"api_key": "k", "base_url": "http://127.0.0.1:9"}),
        ("sns", {"region": "us-east-1", "access_key_id": "A", "secret_access_key": "S"}),
        ("vonage", {"api_key": "k", "api_secret": "s", "from": "tidings"}),
        ("sendgrid", {"api_key": "SG.x", "from": "a@b.test"}),
        ("postmark", {"server_token": "t", "from": "a@b.test"}),
        ("simulator", {"base_url": "http://127.0.0.1:9"}),
    ],
)
def test_posts_to_providers_without_webhooks_or_not_configured_are_404(
    tidings: Tidings, provider: str, settings: dict[str, str]
) -> None:
    http = client(tidings, {provider: build(provider, settings)})
    headers = {"Content-Type": "application/json"}
    body = json.dumps({"status": "delivered", "messageId": "1", "sig": "x"}).encode()
    _assert_problem(_post(http, provider, body, headers), 404)
    _assert_problem(_post(http, "no-such-provider", body, headers), 404)
