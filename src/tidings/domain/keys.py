"""Idempotency keys: how a request, an attempt and a report name themselves."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from tidings.domain.errors import InvalidInput

MAX_KEY_LENGTH = 255


class InvalidKey(InvalidInput):
    def __init__(self, message: str) -> None:
        super().__init__("idempotency_key", message)


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key.strip():
        raise InvalidKey("idempotency_key is required")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(f"idempotency_key is longer than {MAX_KEY_LENGTH} characters")
    return key


ATTEMPT_KEY_PREFIX = "tdg"


def attempt_key(intent_id: UUID | str, n: int) -> str:
    """The reference and idempotency key a provider sees for attempt n.

    Derived from the intent's id, which we generate and which is unique
    across tenants, never from the caller's idempotency key: two tenants may
    choose the same key, and a receipt must not be able to name the wrong
    one's attempt (DESIGN.md invariant 6). Keys written before this format
    (``<caller key>:attempt:<n>``) always end in ``attempt:<n>``; these end
    in the id's hex digits and the number, so the two can never be equal.
    """
    if n < 1:
        raise ValueError("attempt numbers start at 1")
    return f"{ATTEMPT_KEY_PREFIX}:{UUID(str(intent_id))}:{n}"


def intent_of_attempt_key(key: str) -> UUID | None:
    """The intent an attempt key of ours was made from, or None for any
    other string (a key from before this format, a forged reference)."""
    prefix, _, rest = key.partition(":")
    intent, _, n = rest.rpartition(":")
    if prefix != ATTEMPT_KEY_PREFIX or not n.isdigit():
        return None
    try:
        found = UUID(intent)
    except ValueError:
        return None
    return found if int(n) >= 1 and attempt_key(found, int(n)) == key else None


def report_key(report_id: str, revision: int | str, channel: str) -> str:
    return f"report:{report_id}:revision:{revision}:{channel}"


def job_recipient_key(
    job_id: UUID | str, recipient_ref: str, channel: str, report: str | None = None
) -> str:
    """One recipient's intent key within one job, `report` its report_key.

    The job's id is part of it: two jobs for the same report revision (a
    mailing and a later re-send to the same list) are different intents, and
    a key shared between them would let the second job's insert drop its
    intents and leave its counts short of its audience. A replayed job is
    the same job (its idempotency key finds it), so it still inserts nothing
    twice.
    """
    if report:
        return f"job:{UUID(str(job_id))}:{report}:{recipient_ref}"
    return f"job:{UUID(str(job_id))}:{recipient_ref}:{channel}"


def fingerprint(request: Mapping[str, Any]) -> str:
    """A stable digest of a create request, to tell a replay from a conflict."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
