"""What tidings signs is verified by the Standard Webhooks library
(https://www.standardwebhooks.com/), as a Svix-style receiver would, and by
the older `X-Tidings-Signature` check, over the same body."""

from __future__ import annotations

import time

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tidings.platform.signing import (
    SIGNATURE_HEADER,
    signed_headers,
    standard_webhooks_secret,
    verify_signature,
)

SECRET = "a-configured-secret-of-any-shape"


def test_both_signatures_verify_over_the_same_body() -> None:
    body = b'{"events": []}'
    headers = signed_headers(SECRET, body, int(time.time()), "events_1_9")
    assert Webhook(standard_webhooks_secret(SECRET)).verify(body, headers) == {"events": []}
    assert verify_signature(SECRET, headers[SIGNATURE_HEADER], body)
    assert headers["webhook-id"] == "events_1_9"


@pytest.mark.parametrize(
    "change",
    [
        lambda h, b: (h, b + b" "),
        lambda h, b: ({**h, "webhook-id": "events_1_10"}, b),
        lambda h, b: ({**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) + 1)}, b),
    ],
    ids=["body", "id", "time"],
)
def test_a_changed_body_id_or_time_fails_the_standard_check(change: object) -> None:
    body = b'{"events": []}'
    headers = signed_headers(SECRET, body, int(time.time()), "events_1_9")
    changed_headers, changed_body = change(headers, body)  # type: ignore[operator]
    with pytest.raises(WebhookVerificationError):
        Webhook(standard_webhooks_secret(SECRET)).verify(changed_body, changed_headers)


def test_another_secret_fails() -> None:
    body = b"{}"
    headers = signed_headers(SECRET, body, int(time.time()), "x")
    with pytest.raises(WebhookVerificationError):
        Webhook(standard_webhooks_secret("another-secret")).verify(body, headers)
