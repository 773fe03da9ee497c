"""Rollout controls matched to an intent (docs/operations.md, "Rolling out").

A control's scope names a channel, a country, a notification purpose and
an event class; '' in any of them covers all. Shadow mode covers an intent
when any enabled shadow control's scope does.

A shadow control may let a live cohort through: each recipient has a
stable bucket, 0..99, from a hash of the tenant and the recipient's
reference, and a recipient whose bucket is below the control's
`live_percent` is sent to for real. The percent only grows, so a recipient
once live stays live; when several controls cover an intent, the smallest
percent decides (every one of them must let the recipient through).

Shadow mode ends for new intents only: one created while a shadow control
covered it stays shadowed when claimed after the control was turned off,
since the live system was sending then (docs/replay.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from tidings.domain.intent import Intent


@dataclass(frozen=True)
class Scope:
    channel: str = ""
    country: str = ""
    purpose: str = ""
    event_class: str = ""

    def covers(self, intent: Intent) -> bool:
        return (
            self.channel in ("", intent.channel)
            and self.country in ("", intent.country or "")
            and self.purpose in ("", intent.purpose)
            and self.event_class in ("", intent.event_class)
        )


@dataclass(frozen=True)
class ShadowControl:
    tenant_id: str
    scope: Scope
    live_percent: int = 0
    # Turned off: the time it was last on, [from, until). An intent created
    # then belongs to the live system that was sending (docs/replay.md).
    was_on: tuple[datetime, datetime] | None = None

    def covers(self, intent: Intent) -> bool:
        if self.tenant_id != intent.tenant_id or not self.scope.covers(intent):
            return False
        return self.was_on is None or self.was_on[0] <= intent.created_at < self.was_on[1]


@dataclass(frozen=True)
class Cohort:
    """Where an intent covered by shadow mode falls: live or shadowed."""

    bucket: int
    live_percent: int

    @property
    def live(self) -> bool:
        return self.bucket < self.live_percent

    def inputs(self) -> dict[str, int | bool]:
        """What the claim's decision inputs record of it (audited)."""
        return {"bucket": self.bucket, "live_percent": self.live_percent, "live": self.live}


def cohort_bucket(tenant_id: str, recipient_ref: str) -> int:
    """The recipient's bucket, 0..99: the same on every claim and worker."""
    digest = hashlib.sha256(f"{tenant_id}\x00{recipient_ref}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def cohort_of(intent: Intent, controls: Iterable[ShadowControl]) -> Cohort | None:
    """None when no enabled shadow control covers the intent."""
    percents = [c.live_percent for c in controls if c.covers(intent)]
    if not percents:
        return None
    return Cohort(cohort_bucket(intent.tenant_id, intent.recipient_ref), min(percents))
