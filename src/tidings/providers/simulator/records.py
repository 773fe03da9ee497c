"""What the simulator keeps: requests' answers, messages and receipts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from tidings.providers.simulator import views
from tidings.providers.simulator.profiles import Profile

iso = views.iso


def destination_hash(to: str) -> str:
    return hashlib.sha256(to.encode()).hexdigest()


@dataclass(frozen=True)
class Reply:
    """What the HTTP layer should answer; the in-process adapter reads it directly."""

    status_code: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    latency_s: float = 0.0
    stall_s: float = 0.0  # > 0: the answer must not arrive before the client gives up


@dataclass
class Message:
    message_id: str
    channel: str
    idempotency_key: str  # the reference we sent: our key, whatever the profile does with it
    accepted_at: float
    sent_at: float
    final_at: float
    final_status: str
    final_code: str | None
    to: str = ""
    # The profile it was sent through: its lookups and receipts stay that
    # provider's after its channel moves to another (a soak's switch).
    profile: str = ""

    def state_at(self, now: float) -> tuple[str, str | None, float]:
        if now >= self.final_at:
            return self.final_status, self.final_code, self.final_at
        if now >= self.sent_at:
            return "sent", None, self.sent_at
        return "queued", None, self.accepted_at

    def view(self, now: float, profile: Profile) -> dict[str, Any]:
        """What a lookup answers, in the profile's words."""
        status, code, updated = self.state_at(now)
        raw = profile.raw(status, code) or profile.raw("queued", None) or (status, code)
        return views.lookup_view(
            profile, self.message_id, self.channel, self.idempotency_key, raw, updated,
            self.accepted_at,
        )  # fmt: skip


@dataclass
class Receipt:
    event: dict[str, Any]
    due_at: float
    duplicate: bool = False
    state: str = "pending"  # pending, delivered, failed, lost, dropped
    attempts: int = 0
    # Added to the webhook URL's query (Twilio's StatusCallback carries our
    # reference there, not in the body).
    query: dict[str, str] = field(default_factory=dict)
    profile: str = "ideal"  # the provider speaking, for the receiver (PROFILE_HEADER)
    to: str = ""  # the message's destination, for wires whose receipts name it

    def view(self) -> dict[str, Any]:
        return {
            "event_id": self.event["event_id"],
            "message_id": self.event["message_id"],
            "status": self.event["status"],
            "due_at": iso(self.due_at),
            "duplicate": self.duplicate,
            "state": self.state,
            "attempts": self.attempts,
            "profile": self.profile,
        }
