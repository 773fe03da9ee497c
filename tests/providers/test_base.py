"""The contract's own helpers: Retry-After, headers, value checks, redacted observations."""

from __future__ import annotations

from datetime import datetime

import httpx
import pytest

from tidings.domain.redaction import REDACTED
from tidings.providers.base import stable_key
from tidings.providers.messages import Headers, WebhookRequest
from tidings.providers.outcomes import Observation, ObservedStatus
from tidings.providers.retry_after import parse_retry_after, response_retry_after


def test_observation_redacts_raw_and_requires_aware_time() -> None:
    observation = Observation(
        "p", "SM1", "k", ObservedStatus.delivered, None, "delivered", None, "p:1",
        raw={"to": "+15551234567", "status": "delivered"},
    )  # fmt: skip
    assert observation.raw == {"to": REDACTED, "status": "delivered"}
    with pytest.raises(ValueError, match="timezone-aware"):
        Observation(
            "p", None, None, ObservedStatus.unknown, None, "x", datetime(2030, 1, 1), "p:2"
        )  # fmt: skip


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("Wed, 01 Jan 2031 00:00:10 GMT", 10.0),
        ("soon", None),
        (None, None),
        ("", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    now = datetime.fromisoformat("2031-01-01T00:00:00+00:00").timestamp()
    assert parse_retry_after(value, now=now) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        # A date is read against the provider's own Date: whatever this
        # host's clock says (2026 here, years before either), ten seconds.
        (
            {
                "retry-after": "Wed, 01 Jan 2031 00:00:10 GMT",
                "date": "Wed, 01 Jan 2031 00:00:00 GMT",
            },
            10.0,
        ),
        ({"retry-after": "12"}, 12.0),
        ({"retry-after": "12", "date": "nonsense"}, 12.0),
        ({}, None),
    ],
)
def test_a_retry_after_date_is_read_on_the_providers_clock(
    headers: dict[str, str], expected: float | None
) -> None:
    assert response_retry_after(httpx.Response(429, headers=headers)) == expected


def test_webhook_headers_are_case_insensitive() -> None:
    request = WebhookRequest("POST", "https://x/", {"X-Sig": "a"}, b"{}")
    assert request.headers["x-sig"] == request.headers.get("X-SIG") == "a"
    assert Headers([("A", "1")]) == {"a": "1"}


def test_stable_key_depends_only_on_its_parts() -> None:
    assert stable_key("p", "SM1", "delivered") == stable_key("p", "SM1", "delivered")
    assert stable_key("p", "SM1", "delivered") != stable_key("p", "SM1", "sent")
