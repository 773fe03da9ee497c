"""Rollout controls matched to an intent (docs/operations.md, "Rolling out").

A control's scope names a channel, a country, a notification purpose and
an event class; '' in any of them covers all. Shadow mode covers an intent
when any enabled shadow control's scope does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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


def shadowed(intent: Intent, controls: Iterable[ShadowControl]) -> bool:
    """Whether an enabled shadow control of the intent's tenant covers it."""
    return any(c.tenant_id == intent.tenant_id and c.scope.covers(intent) for c in controls)
