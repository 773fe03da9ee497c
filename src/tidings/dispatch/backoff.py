"""A provider that says "back off" is backed off by everyone.

The answers of a group of calls are counted per provider account in the
transaction that records them: a 429 pauses the account until its
Retry-After (or an exponential backoff with jitter), a storm of 5xx answers
and timeouts opens the same pause (domain/breaker.py). Every worker's claim
for a paused account waits (dispatch/claim.py); other accounts and channels
go on. An acceptance starts the count again.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from tidings.dispatch.record import Sent
from tidings.providers.outcomes import Accepted, Indeterminate, RejectCode, Retryable
from tidings.store import provider_pauses

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.backoff")

# Retryable answers that speak for the account, not for one message: a 429,
# or a 408 (the provider gave up reading). A Retryable PROVIDER_ERROR is
# ours (a configuration or a token that could not be minted).
_RETRYABLE_BACKOFF = frozenset({RejectCode.RATE_LIMITED, RejectCode.TIMEOUT})
_STORM = frozenset({RejectCode.PROVIDER_ERROR, RejectCode.TIMEOUT})


def note_answers(
    conn: Conn, sent: Sequence[Sent], now: datetime, rng: random.Random
) -> dict[str, datetime]:
    """Count the group's back-off answers; returns the accounts now paused."""
    paused: dict[str, datetime] = {}
    accepted = []
    for item in sent:
        result, account = item.result, item.claimed.provider
        if isinstance(result, Accepted):
            accepted.append(account)
            continue
        if isinstance(result, Retryable) and result.code in _RETRYABLE_BACKOFF:
            retry_after = result.retry_after_seconds
        elif isinstance(result, Indeterminate) and result.code in _STORM:
            retry_after = None
        else:
            continue
        until = provider_pauses.note_backoff(
            conn, account, result.code.value, retry_after, now, rng
        )
        if until is not None and until > paused.get(account, now):
            paused[account] = until
    provider_pauses.note_accepted(conn, accepted, now)
    for account, until in paused.items():
        log.warning(
            "provider account paused",
            extra={"provider": account, "paused_until": until.isoformat()},
        )
    return paused
