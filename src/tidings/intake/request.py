"""A create request, checked: every field bounded and parsed before any write.

Bad input raises InvalidInput (or one of its kinds) and creates nothing;
intake.py turns a parsed request into a durable intent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tidings.domain.errors import InvalidInput
from tidings.domain.keys import check_key, fingerprint
from tidings.domain.moments import check_moment
from tidings.domain.recipients import Channel, Recipient, parse_channel, parse_recipient
from tidings.domain.storable import check_fields

MAX_VARIABLES_BYTES = 16_384


@dataclass(frozen=True)
class IntentRequest:
    idempotency_key: str
    channel: Channel
    recipient: Recipient
    template_name: str
    template_revision: int | None
    variables: Mapping[str, Any]
    purpose: str
    event_class: str
    expires_at: datetime | None
    not_before: datetime | None
    correlation_id: str | None
    resend_budget: int | None

    @classmethod
    def parse(cls, *, now: datetime, **raw: Any) -> IntentRequest:
        check_fields(raw)  # NUL, bad Unicode, JSON too deep: 4xx, not a driver error
        channel = parse_channel(raw.get("channel"))
        name, revision = _template(raw.get("template"))
        return cls(
            idempotency_key=check_key(raw.get("idempotency_key")),
            channel=channel,
            recipient=parse_recipient(channel, _mapping("recipient", raw.get("recipient"))),
            template_name=name,
            template_revision=revision,
            variables=_variables(raw.get("variables")),
            purpose=_word("purpose", raw.get("purpose")),
            event_class=_word("event_class", raw.get("event_class")),
            expires_at=_moment("expires_at", raw.get("expires_at"), now, future=True),
            not_before=_moment("not_before", raw.get("not_before"), now, future=False),
            correlation_id=_optional_text("correlation_id", raw.get("correlation_id")),
            resend_budget=_budget(raw.get("resend_budget")),
        )

    def fingerprint(self, destination_ref: str) -> str:
        return fingerprint(
            {
                "channel": self.channel.value,
                "recipient": {
                    "ref": self.recipient.ref,
                    "destination": destination_ref,
                    "timezone": self.recipient.timezone,
                    "locale": self.recipient.locale,
                },
                "template": [self.template_name, self.template_revision],
                "variables": self.variables,
                "purpose": self.purpose,
                "event_class": self.event_class,
                "expires_at": self.expires_at.isoformat() if self.expires_at else None,
                "not_before": self.not_before.isoformat() if self.not_before else None,
                "correlation_id": self.correlation_id,
                "resend_budget": self.resend_budget,
            }
        )


def _mapping(field: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(field, "must be an object")
    return value


def _template(value: object) -> tuple[str, int | None]:
    if isinstance(value, str):
        return _word("template", value), None
    data = _mapping("template", value)
    revision = data.get("revision")
    if revision is not None and (
        not isinstance(revision, int) or isinstance(revision, bool) or revision < 1
    ):
        raise InvalidInput("template.revision", "must be a positive integer")
    return _word("template.name", data.get("name")), revision


def _word(field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "is required")
    if len(value) > 200:
        raise InvalidInput(field, "is longer than 200 characters")
    return value


def _optional_text(field: str, value: object) -> str | None:
    return None if value is None else _word(field, value)


def _variables(value: object) -> Mapping[str, Any]:
    if value is None:
        return {}
    data = _mapping("variables", value)
    try:
        encoded = json.dumps(data)
    except (TypeError, ValueError):
        raise InvalidInput("variables", "must be JSON values") from None
    if len(encoded) > MAX_VARIABLES_BYTES:
        raise InvalidInput("variables", f"larger than {MAX_VARIABLES_BYTES} bytes")
    return dict(json.loads(encoded))


def _moment(field: str, value: object, now: datetime, *, future: bool) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInput(field, "is not an ISO-8601 time") from None
    value = check_moment(field, value)  # within the range every reader can decode
    if future and value <= now:
        raise InvalidInput(field, "is already in the past")
    return value


def _budget(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10:
        raise InvalidInput("resend_budget", "must be an integer from 0 to 10")
    return value
