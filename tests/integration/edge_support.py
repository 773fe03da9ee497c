"""Shared set-up for the request-edge tests: a policy bounding resets, the
reset template, and reset bodies to ordinary and premium-rate numbers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tidings import Tidings
from tidings.policies import builtin_document

# Per destination 3, per prefix 20, in an hour; the numbers below are valid
# and in the premium-rate ranges of the UK (+44 909) and Latvia (+371 900).
PER_DESTINATION = 3
PER_PREFIX = 20
PUMPED = ("+44909", "+371900")


def bounded_policy(version: str = "edge-1") -> dict[str, Any]:
    doc = builtin_document("default")
    doc["version"] = version
    doc["user_triggered"] = {
        "password_reset": {
            "destination": {"limit": PER_DESTINATION, "per_seconds": 3600},
            "prefix": {"limit": PER_PREFIX, "per_seconds": 3600},
        }
    }
    return doc


def set_up_resets(t: Tidings) -> None:
    """`t`'s tenant with the bounding policy and the reset template."""
    t.publish_policy(bounded_policy())
    t.publish_template(
        "password_reset", channel="sms", body="Your code is {{ code }}", required_variables=["code"]
    )


def premium(n: int, country: str = "GB") -> str:
    """The n-th premium-rate number of the UK's +44 909 or Latvia's +371 900."""
    return f"+44909{8790000 + n}" if country == "GB" else f"+371900{10000 + n}"


def ordinary(n: int) -> str:
    """The n-th number of an ordinary US range, each in an area code of its own."""
    area = (201, 212, 305, 312, 415, 503, 617, 702, 808, 917)[n % 10]
    return f"+1{area}555{n:04d}"


def reset_body(t: Tidings, phone: str, key: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotency_key": key,
        "channel": "sms",
        "recipient": {"ref": f"player-{key}", "phone": phone, "timezone": "UTC"},
        "template": {"name": "password_reset"},
        "variables": {"code": "123456"},
        "purpose": "security",
        "event_class": "password_reset",
        "expires_at": (t.clock.now() + timedelta(minutes=10)).isoformat(),
    }
    body.update(overrides)
    return body
