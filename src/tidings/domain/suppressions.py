"""Suppressions as an operator reviews them (docs/providers.md, "Reviewing
and lifting suppressions"): the record with its evidence, the listing's
filter, and what a lift must say.

A suppression names its destination by keyed hash only. Its evidence is
what the fact that wrote it left: the provider, the intent and attempt,
and the provider's raw status (none for rows written by hand, or by a
send-time rejection before migration 0035). A lifted suppression keeps all
of it, with who lifted it, when and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from tidings.domain.errors import InvalidInput
from tidings.domain.storable import check_text

# The suppressions table's reasons (its CHECK constraint).
REASONS: Final = ("hard_bounce", "complaint", "operator", "invalid")
CHANNELS: Final = ("sms", "email")
MOST_LIFT_REASON: Final = 500


@dataclass(frozen=True)
class Suppression:
    """One suppression, active or lifted, with its evidence."""

    id: UUID
    channel: str
    destination_hash: str  # the keyed hash; the destination itself is never shown
    reason: str
    created_at: datetime
    provider: str | None = None
    intent_id: UUID | None = None
    attempt_n: int | None = None
    raw_status: str | None = None
    recipient_ref: str | None = None  # the evidence intent's recipient, if it names one
    lifted_at: datetime | None = None
    lifted_by: str | None = None
    lift_reason: str | None = None

    @property
    def state(self) -> str:
        return "active" if self.lifted_at is None else "lifted"

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Suppression:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in row.items() if k in names})


@dataclass(frozen=True)
class SuppressionFilter:
    """All given fields must match; None is not filtered on. `lifted`
    chooses the active suppressions (False) or the lifted ones (True)."""

    reason: str | None = None
    provider: str | None = None
    channel: str | None = None
    since: datetime | None = None  # created at or after
    lifted: bool = False

    def __post_init__(self) -> None:
        if self.reason is not None and self.reason not in REASONS:
            raise InvalidInput("reason", f"use one of {', '.join(REASONS)}")
        if self.channel is not None and self.channel not in CHANNELS:
            raise InvalidInput("channel", "use sms or email")
        if self.provider is not None:
            check_text("provider", self.provider)
        if self.since is not None and self.since.tzinfo is None:
            raise InvalidInput("since", "needs a UTC offset")


def lift_reason(text: str) -> str:
    """Why an operator lifts a suppression: required, kept as given."""
    if not text or not text.strip():
        raise InvalidInput("reason", "say why the suppression is lifted")
    if len(text) > MOST_LIFT_REASON:
        raise InvalidInput("reason", f"at most {MOST_LIFT_REASON} characters")
    check_text("reason", text)
    return text
