"""A provider's answer to a send it did not accept is kept on the attempt,
redacted and bounded (seed 002), and shown by GET /v1/intents/{id}."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tidings import ManualClock, Tidings
from tidings.providers.response_body import MAX_BODY_BYTES, kept_body

from .api_support import auth, client, new_key
from .dispatch_helpers import offer, publish_offer_template, simulator, worker


def test_a_body_is_redacted_before_it_is_cut() -> None:
    body = json.dumps(
        {
            "error": "invalid 'to'",
            "to": "+14155550000",
            "detail": "reader7@example.com bounced before; call +1 415 555 0199",
            "api_key": "SG.live-secret",
            "padding": "x" * 10_000,
        }
    )
    kept = kept_body(body)
    assert kept is not None and len(kept.encode()) <= MAX_BODY_BYTES
    for secret in ("4155550000", "reader7@example.com", "555 0199", "SG.live-secret"):
        assert secret not in kept
    assert "invalid 'to'" in kept
    # Not JSON: text is redacted as text, and a multi-byte character is never split.
    text = kept_body("<html>bad address reader7@example.com " + "é" * 3000)
    assert text is not None and "reader7@example.com" not in text
    assert len(text.encode()) <= MAX_BODY_BYTES
    assert kept_body("   ") is None


def bodies(db_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT code, response_body FROM attempts ORDER BY created_at"
        ).fetchall()


@pytest.mark.parametrize("phone", ["+14155550000", "+14155550500"])  # a 400 and a 500
def test_a_non_2xx_answer_is_kept_on_the_attempt_and_shown(
    tidings: Tidings, clock: ManualClock, db_url: str, phone: str
) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    intent = offer(tidings, recipient={"ref": "member-1", "phone": phone})
    assert w.dispatch_once() == 1
    [(code, body)] = bodies(db_url)
    assert body, code
    assert phone not in body and phone[2:] not in body
    [attempt] = tidings.get(intent.id).attempts
    assert attempt.response_body == body
    http, key = client(tidings), new_key(tidings, "default")
    shown = http.get(f"/v1/intents/{intent.id}", headers=auth(key)).json()
    assert shown["attempts"][0]["response_body"] == body


def test_an_accepted_send_keeps_no_body(tidings: Tidings, clock: ManualClock, db_url: str) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    offer(tidings)
    assert w.dispatch_once() == 1
    assert [body for _, body in bodies(db_url)] == [None]
