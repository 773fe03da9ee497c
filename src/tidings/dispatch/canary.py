"""Synthetic canaries: one round through every provider account (issue #41 item 2).

A round sends one message of fixed synthetic text per provider account and
channel to that provider's official test destination
(providers/canary_targets.py), through the account's adapter directly:
never through an intent. So a canary creates no intent or attempt, checks
and touches no suppression, consumes no rate allowance and counts in no
member figure; its answer goes to `canary_results` alone (store/canaries.py),
where the `canary_failed:<account>` alert (observability/alerts/canaries.py),
the `tidings_canary_*` metrics and the console's Canaries table read it.

In the worker's maintenance loop a round runs at most once per
`TIDINGS_CANARY_INTERVAL_SECONDS` across all workers: the round is claimed
by a conditional insert on its `alert_rounds` row, committed before any
network call (a worker that dies mid-round costs one round, never two).
`tidings canary run` does one round by hand, whatever the interval.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx

from tidings.domain.redaction import redact_text
from tidings.providers.base import ProviderAdapter
from tidings.providers.canary_targets import (
    CanarySkipped,
    CanaryTarget,
    send_canary,
    targets_for,
    with_test_settings,
)
from tidings.providers.errors import ProviderError
from tidings.providers.outcomes import Accepted, ObservedStatus, SendResult
from tidings.providers.settings import build, settings_from_env
from tidings.runtime import Runtime
from tidings.store import alerts as rounds
from tidings.store import canaries
from tidings.store.canaries import CanaryResult
from tidings.store.database import Database

log = logging.getLogger("tidings.canary")
ROUND_SCOPE = "canary"  # the canary round's row in alert_rounds
KEEP = timedelta(days=7)  # older answers are forgotten (each pair's newest stays)
_RECEIPT_FAILED = frozenset({ObservedStatus.failed, ObservedStatus.undelivered})


@dataclass
class CanaryRound:
    at: datetime
    results: list[CanaryResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # account -> why

    @property
    def failed(self) -> list[CanaryResult]:
        return [r for r in self.results if not r.ok]


def run_round(
    db: Database,
    adapters: Mapping[str, ProviderAdapter],
    now: datetime,
    environ: Mapping[str, str] | None = None,
) -> CanaryRound:
    """One canary per account and channel now; answers stored."""
    found = send_round(adapters, now, environ)
    with db.transaction() as conn:
        for result in found.results:
            canaries.record(conn, result)
        canaries.purge(conn, now - KEEP)
    for result in found.failed:
        log.warning("canary failed: %s %s %s", result.account, result.channel, result.code)
    return found


def send_round(
    adapters: Mapping[str, ProviderAdapter],
    now: datetime,
    environ: Mapping[str, str] | None = None,
) -> CanaryRound:
    """One canary per account and channel now, nothing stored. Test
    credentials are read from `environ` (default: the process's)."""
    env = os.environ if environ is None else environ
    found = CanaryRound(now)
    for account, adapter in sorted(by_account(adapters).items()):
        try:
            targets = targets_for(account)
        except CanarySkipped as skip:
            found.skipped[account] = str(skip)
            continue
        for target in targets:
            if target.channel not in adapter.channels:
                continue
            try:
                found.results.append(_one(account, adapter, target, now, env))
            except CanarySkipped as skip:
                found.skipped[f"{account}/{target.channel}"] = str(skip)
    return found


def by_account(adapters: Mapping[str, ProviderAdapter]) -> dict[str, ProviderAdapter]:
    """The adapters by provider account (one adapter may serve both channels)."""
    return {adapter.account: adapter for adapter in adapters.values()}


def _one(
    account: str,
    adapter: ProviderAdapter,
    target: CanaryTarget,
    now: datetime,
    env: Mapping[str, str],
) -> CanaryResult:
    sender = adapter
    if target.test_settings or target.test_credentials is not None:
        sender = build(
            account, with_test_settings(account, target, settings_from_env(account, env))
        )
    key = f"canary:{account}:{target.channel}:{int(now.timestamp())}"
    try:
        ok, code, answer = _judge(sender, target, send_canary(sender, target, key))
    except (ProviderError, httpx.HTTPError, OSError) as exc:
        ok, code, answer = False, "CANARY_ERROR", f"{type(exc).__name__}: {exc}"
    finally:
        if sender is not adapter:
            sender.close()
    return CanaryResult(account, target.channel, now, target.name, ok, code, redact_text(answer))


def _judge(
    adapter: ProviderAdapter, target: CanaryTarget, result: SendResult
) -> tuple[bool, str, str]:
    if not isinstance(result, Accepted):
        said = result.detail or result.response_body or ""
        status = f"HTTP {result.http_status}" if result.http_status else None
        own = getattr(result, "provider_code", None)  # Twilio 21606, an AWS error name
        parts = [status if status and status not in said else None, own, said]
        answer = " ".join(p for p in parts if p)
        return False, result.code.value, f"{type(result).__name__}: {answer}"
    if not (target.check_receipt and adapter.can_look_up(target.channel)):
        return True, "ACCEPTED", f"accepted ({result.raw_status or result.status.value})"
    seen = adapter.status(result.provider_message_id)
    if seen is not None and seen.status in _RECEIPT_FAILED:
        return False, seen.code or seen.status.value.upper(), f"receipt: {seen.raw_status}"
    state = seen.status.value if seen is not None else "not found yet"
    return True, "ACCEPTED", f"accepted; receipt: {state}"


class CanarySchedule:
    """The maintenance loop's canary step: a round at most once an interval."""

    def __init__(self, runtime: Runtime, adapters: Mapping[str, ProviderAdapter]) -> None:
        self.runtime = runtime
        self.adapters = adapters
        self.interval = runtime.settings.canary_interval_seconds
        self._last: datetime | None = None

    def due(self, now: datetime) -> bool:
        """Whether this worker should try to claim a round (no database read)."""
        if self.interval <= 0:
            return False
        # (a clock set back starts a new round at once)
        return self._last is None or not 0 <= (now - self._last).total_seconds() < self.interval

    def tick(self, now: datetime) -> CanaryRound | None:
        """A round, if due here and no worker took it this interval."""
        if not self.due(now):
            return None
        self._last = now
        with self.runtime.db.transaction() as conn:
            # Committed before any call: another worker sees the round taken.
            if not rounds.claim_round(conn, ROUND_SCOPE, now, self.interval, 1.0):
                return None
        return run_round(self.runtime.db, self.adapters, now)
