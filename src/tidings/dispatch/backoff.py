"""A provider that says "back off" is backed off by everyone.

The answers of a group of calls are counted per provider account in the
transaction that records them: a 429 pauses the account until its
Retry-After (or an exponential backoff with jitter), a storm of 5xx answers
and timeouts opens the same pause (domain/breaker.py). Every worker's claim
for a paused account waits (dispatch/claim.py); other accounts and channels
go on. An acceptance starts the count again.

Each answer is also counted for the tenant whose message drew it: our own
exponential backoff grows for that tenant alone, while the account's pause
for everyone stops growing at SHARED_MAX_SECONDS (domain/breaker.py,
issue #39): claims skip a held tenant's intents (`claim_due`).

An account restriction (`ACCOUNT_RESTRICTED`, a sandbox or a suspended
account) pauses the account the same way, for minutes (domain/breaker.py):
every send would be refused alike, so the worker stops burning the queue
into `failed`. The intent that drew it has failed (it was refused); those
claimed meanwhile are handed back unsent (`PROVIDER_PAUSED`). A group's
restrictions count once per account: answers to calls made together say
one thing, and must not double the pause once per call (issue #37).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import psycopg

from tidings.dispatch.record import Sent
from tidings.providers.outcomes import Accepted, Indeterminate, RejectCode, Rejected, Retryable
from tidings.store import provider_pauses
from tidings.store.database import Database

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.backoff")

# Retryable answers that speak for the account, not for one message: a 429,
# or a 408 (the provider gave up reading). A Retryable PROVIDER_ERROR is
# ours (a configuration or a token that could not be minted).
_RETRYABLE_BACKOFF = frozenset({RejectCode.RATE_LIMITED, RejectCode.TIMEOUT})
_STORM = frozenset({RejectCode.PROVIDER_ERROR, RejectCode.TIMEOUT})


# What a worker keeps of the group's pauses: (account, None) for the
# account's pause, (account, tenant) for a tenant held back on it.
PauseKey = tuple[str, str | None]


def note_answers(
    conn: Conn, sent: Sequence[Sent], now: datetime, rng: random.Random
) -> dict[PauseKey, datetime]:
    """Count the group's back-off answers; returns the accounts now paused
    and the tenants now held back on one."""
    paused: dict[PauseKey, datetime] = {}
    causes: dict[str, str] = {}  # account -> whose answer set its pause's end
    accepted = []
    restricted: set[str] = set()  # accounts whose restriction this group counted
    for item in sent:
        if item.pause_noted:  # counted when it was answered (Pauses.note_at_once)
            continue
        result, account = item.result, item.claimed.provider
        tenant_id = item.claimed.intent.tenant_id
        if isinstance(result, Accepted):
            accepted.append((account, tenant_id))
            continue
        if isinstance(result, Retryable) and result.code in _RETRYABLE_BACKOFF:
            retry_after = result.retry_after_seconds
        elif isinstance(result, Indeterminate) and result.code in _STORM:
            retry_after = None
        elif _restricted(result) and account not in restricted:
            restricted.add(account)
            retry_after = None
        else:
            continue
        noted = provider_pauses.note_backoff(
            conn, account, tenant_id, result.code.value, retry_after, now, rng
        )
        if _later(paused, (account, None), noted.account_until, now):
            causes[account] = tenant_id
        _later(paused, (account, tenant_id), noted.tenant_until, now)
    provider_pauses.note_accepted(conn, accepted, now)
    _log(paused, causes)
    return paused


def says_back_off(result: object) -> bool:
    """A 429 or a 408: the account must pause for everyone at once."""
    return isinstance(result, Retryable) and result.code in _RETRYABLE_BACKOFF


class Pauses:
    """The pauses one worker knows of: those its own answers recorded, and
    those the read before a call found (the tables hold them for every
    worker). Its calls already claimed for one are handed back, not made."""

    def __init__(self, db: Database, rng: random.Random) -> None:
        self._db, self._rng = db, rng
        self._lock = threading.Lock()
        self._until: dict[PauseKey, datetime] = {}

    def learn(self, paused: Mapping[PauseKey, datetime], now: datetime) -> None:
        with self._lock:
            for key, until in paused.items():
                self._until[key] = max(until, self._until.get(key, until))
            # Ended pauses go: one key per held tenant would pile up.
            self._until = {k: u for k, u in self._until.items() if u > now}

    def until(self, account: str, tenant_id: str, now: datetime) -> datetime | None:
        """When the account's pause (or the tenant's hold on it) ends; None: not paused."""
        with self._lock:
            found = [self._until.get((account, None)), self._until.get((account, tenant_id))]
        latest = max((u for u in found if u is not None), default=None)
        return latest if latest is not None and now < latest else None

    def note_at_once(self, sent: Sent, now: datetime) -> Sent:
        """Pause the account for a back-off answer now, in a transaction of
        its own, rather than when the answer's group is recorded: every
        other worker's next call reads the pause (the call-started mark)
        within this one commit, not after the slowest call of the group.
        If it cannot be written, the group's record counts it instead."""
        try:
            with self._db.transaction() as conn:
                paused = note_answers(conn, [sent], now, self._rng)
        except psycopg.Error as exc:
            log.warning("pausing at once: %s; left to the group's record", type(exc).__name__)
            return sent
        self.learn(paused, now)
        return replace(sent, pause_noted=True)


def _restricted(result: object) -> bool:
    return isinstance(result, Rejected) and result.code is RejectCode.ACCOUNT_RESTRICTED


def _later(
    paused: dict[PauseKey, datetime], key: PauseKey, until: datetime | None, now: datetime
) -> bool:
    if until is not None and until > paused.get(key, now):
        paused[key] = until
        return True
    return False


def _log(paused: dict[PauseKey, datetime], causes: dict[str, str]) -> None:
    """The operators' record of whose traffic drew a pause: the log names the
    tenant (a tenant's own alert names only its own traffic)."""
    for (account, tenant_id), until in paused.items():
        if tenant_id is None:
            message = "provider account paused"
            fields = {"paused_until": until.isoformat(), "caused_by": causes.get(account)}
        else:
            message = "tenant held back on a provider account: its traffic drew the back-off"
            fields = {"held_until": until.isoformat(), "caused_by": tenant_id}
        log.warning(message, extra={"provider": account, **fields})
