"""tidings: durable, auditable e-mail and SMS notifications on PostgreSQL."""

from tidings.client import Tidings
from tidings.domain.clock import Clock, ManualClock, SystemClock
from tidings.domain.errors import (
    AlreadyLifted,
    AlreadyTerminal,
    AudienceUploadUsed,
    CohortShrink,
    Conflict,
    IdempotencyConflict,
    InvalidInput,
    NotFound,
    RequestLimited,
    StaleTransition,
    TidingsError,
)
from tidings.domain.intent import Attempt, Intent, TimelineEntry
from tidings.domain.listing import Page
from tidings.domain.states import AttemptState, IntentState
from tidings.domain.suppressions import Suppression
from tidings.providers.base import ProviderAdapter

__all__ = [
    "AlreadyLifted",
    "AlreadyTerminal",
    "Attempt",
    "AttemptState",
    "AudienceUploadUsed",
    "Clock",
    "CohortShrink",
    "Conflict",
    "IdempotencyConflict",
    "Intent",
    "IntentState",
    "InvalidInput",
    "ManualClock",
    "NotFound",
    "Page",
    "ProviderAdapter",
    "RequestLimited",
    "StaleTransition",
    "Suppression",
    "SystemClock",
    "Tidings",
    "TidingsError",
    "TimelineEntry",
]
