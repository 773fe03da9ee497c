"""What a provider can tell us about one attempt, by whatever it offers.

The ways, in order (DESIGN.md invariant 3):

1. by the provider's message id, when we recorded it;
2. for an outcome that is unknown (the call started, its answer never
   came), by our key (the simulator's `ideal` profile: no real provider),
   by a reference of ours the provider stores and can search (Postmark's
   metadata), or by its list search of messages to the attempt's
   destination around the time the call started (Twilio's Messages list).

A list search names messages, not attempts: one of them is ours only when
it is the one message there nobody else claims (no attempt of ours has its
id) and no other call of ours to that destination through that account was
open at the time. Anything else is ambiguous and proves nothing: the check
is repeated until its budget ends. An empty answer proves absence only once
no request for the attempt can still be on its way (`settled_by`).

A way the provider answers is not offered (HTTP 501, the simulator's
`NOT_SUPPORTED`: we believed it plays another provider) is passed over for
the next way in the same check: spending the polling budget on 501s ended
attempts `unknown` that the list search could have proved absent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from tidings.domain.intent import Attempt
from tidings.domain.states import AttemptState
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import ProviderError
from tidings.providers.outcomes import Observation

# The provider's clock and ours may disagree by this much.
CLOCK_SKEW = timedelta(seconds=5)


@dataclass(frozen=True)
class Found:
    """A lookup's answer: what the provider said, and whether its silence
    proves the call never reached it."""

    observation: Observation | None
    absent: bool = False
    how: str = "none"  # id, key, reference, search, ambiguous, none


@dataclass(frozen=True)
class Evidence:
    """What deciding a list search needs from our side of the ledger."""

    destination: Callable[[], str | None]  # the attempt's raw destination
    known: Callable[[str], bool]  # a provider message id some attempt of ours has
    rivals: Callable[[datetime, datetime], int]  # other open calls to it, by start time


def look_up(
    adapter: ProviderAdapter,
    attempt: Attempt,
    now: datetime,
    settled_by: datetime,
    evidence: Evidence,
) -> Found:
    """Raises ProviderError when the provider could not answer."""
    channel = attempt.channel
    if attempt.provider_message_id:
        if adapter.can_look_up(channel):
            try:
                return Found(adapter.status(attempt.provider_message_id), how="id")
            except ProviderError as exc:
                if not _not_supported(exc):
                    raise
        return Found(None)  # no lookup: receipts, until the budget ends
    if attempt.state is not AttemptState.UNKNOWN:
        return Found(None)
    proof = now >= settled_by
    for way in (_by_key, _by_reference, _by_search):
        try:
            found = way(adapter, attempt, now, proof, evidence)
        except ProviderError as exc:
            if not _not_supported(exc):
                raise
            continue  # the adapter asked again what is offered; try the next way
        if found is not None:
            return found
    return Found(None)


def _not_supported(exc: ProviderError) -> bool:
    """HTTP 501 Not Implemented: this way is not offered, nothing else is wrong."""
    return exc.status_code == 501


def _by_key(
    adapter: ProviderAdapter, attempt: Attempt, now: datetime, proof: bool, evidence: Evidence
) -> Found | None:
    if not adapter.can_find_by_key(attempt.channel):
        return None
    found = adapter.find_by_key(attempt.attempt_key)
    return Found(found, absent=found is None and proof, how="key")


def _by_reference(
    adapter: ProviderAdapter, attempt: Attempt, now: datetime, proof: bool, evidence: Evidence
) -> Found | None:
    if not adapter.can_find_by_reference(attempt.channel):
        return None
    matches = adapter.find_by_reference(attempt.channel, attempt.attempt_key)
    first = matches[0] if matches else None
    return Found(_ours(first, attempt), absent=first is None and proof, how="reference")


def _by_search(
    adapter: ProviderAdapter, attempt: Attempt, now: datetime, proof: bool, evidence: Evidence
) -> Found | None:
    if not adapter.can_search(attempt.channel):
        return None
    return _search(adapter, attempt, now, proof, evidence)


def _search(
    adapter: ProviderAdapter, attempt: Attempt, now: datetime, proof: bool, evidence: Evidence
) -> Found:
    destination = evidence.destination()
    if destination is None:
        return Found(None)
    started = attempt.call_started_at or attempt.created_at
    since, until = started - CLOCK_SKEW, now + CLOCK_SKEW
    listed = adapter.search(attempt.channel, destination, since, until)
    unclaimed = [
        m for m in listed if m.provider_message_id and not evidence.known(m.provider_message_id)
    ]
    if not unclaimed:
        return Found(None, absent=proof, how="search")
    if len(unclaimed) == 1 and evidence.rivals(since, until) == 0:
        return Found(_ours(unclaimed[0], attempt), how="search")
    return Found(None, how="ambiguous")


def _ours(found: Observation | None, attempt: Attempt) -> Observation | None:
    """The provider's message, named as this attempt's: matched by reference."""
    return None if found is None else replace(found, attempt_key=attempt.attempt_key)
