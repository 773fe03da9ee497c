"""The replay's fixture model: a case, its steps, and the names they may use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from tidings.domain.decision_codes import DecisionCode
from tidings.domain.policy import PolicyRequest
from tidings.domain.policy_document import Policy
from tidings.domain.transitions import Event

Effect = Literal["applied", "attempt_only", "ignored"]
Value = bool | int | str | datetime | tuple[str, ...] | None


# A receipt that says "undelivered" without saying whether a resend is due:
# the replay resolves it with `on_undelivered`, as dispatch.observe does.
UNDELIVERED: Final = "undelivered"
EVENT_NAMES: Final = (*(e.value for e in Event), UNDELIVERED)
ACTIONS: Final = ("send", "reschedule", "suppress", "expire")
EFFECTS: Final = ("applied", "attempt_only", "ignored")
# Plain strings, as a fixture spells them.
CODES: Final = frozenset(code.value for code in DecisionCode)


@dataclass(frozen=True)
class Step:
    event: str  # an Event value or UNDELIVERED
    attempt: int | None = None  # which attempt a provider answer/receipt is for; None: latest


@dataclass(frozen=True)
class Case:
    name: str
    why: str
    file: str
    policy: Policy
    request: PolicyRequest
    steps: tuple[Step, ...]
    expect: Mapping[str, Value]  # flat field name -> expected value, only what the case pins
