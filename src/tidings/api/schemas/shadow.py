"""The shadow-rollout report's request and answer (docs/replay.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tidings.api.schemas.admin import ControlScope
from tidings.api.schemas.common import Moment, RequestModel, Text

# A report compares one rollout window; a bigger comparison is paged by window.
MAX_LIVE = 100_000


class LiveOutcomeIn(RequestModel):
    idempotency_key: Text = Field(
        min_length=1,
        max_length=255,
        examples=["waitlist:771:1801:offer:1"],
        description="The intent's idempotency key, as both systems saw it",
    )
    sent: bool = Field(description="whether the live system sent this message")
    code: Text | None = Field(default=None, max_length=200, description="the live system's reason")


class ShadowReportIn(RequestModel):
    since: Moment | None = Field(default=None, description="decisions at or after this time")
    until: Moment | None = Field(default=None, description="decisions before this time (no bound)")
    live: list[LiveOutcomeIn] | None = Field(
        default=None,
        max_length=MAX_LIVE,
        description="what the system that really sent did, one entry per idempotency key; "
        "without it the report only counts the shadow decisions",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "since": "2026-11-01T00:00:00Z",
                    "live": [
                        {"idempotency_key": "waitlist:771:1801:offer:1", "sent": True},
                        {
                            "idempotency_key": "waitlist:771:1802:offer:1",
                            "sent": False,
                            "code": "member_opted_out",
                        },
                    ],
                }
            ]
        },
    )


class ShadowReport(BaseModel):
    tenant: str = Field(description="The tenant reported on")
    since: str | None = Field(
        description="The window's start as given (ISO 8601); null: from the first decision"
    )
    until: str | None = Field(description="The window's end as given (ISO 8601); null: no end")
    as_of: str = Field(description="when the report was made")
    shadow_decisions: int = Field(description="Decisions made in shadow mode within the window")
    by_action: dict[str, int] = Field(description="send, reschedule, suppress, expire")
    by_code: dict[str, int] = Field(description="Shadow decisions per decision code")
    compared_with_live: bool = Field(description="Whether live outcomes were given to compare with")
    agreed: int = Field(description="Decisions the live system's outcome agrees with")
    differences: int = Field(description="Decisions it does not agree with")
    matrix: dict[str, dict[str, int]] = Field(
        description="tidings' action -> the live system's outcome (sent, not_sent, absent) -> count"
    )
    difference_examples: list[dict[str, Any]] = Field(
        description="Up to 100 differences: the intent, tidings' action, code and policy version,"
        " and the live outcome"
    )
    live_without_shadow_decision: int = Field(
        description="Live outcomes whose idempotency key tidings never decided"
    )
    live_without_shadow_decision_examples: list[str] = Field(
        description="Up to 100 of their idempotency keys, sorted"
    )


class RolloutReportIn(RequestModel):
    since: Moment = Field(description="the step's start: intents created at or after it")
    until: Moment | None = Field(default=None, description="created before it (no bound)")
    scope: ControlScope = Field(
        default_factory=ControlScope, description="What to count; empty: everything"
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "since": "2026-12-01T09:00:00Z",
                    "scope": {"channel": "sms", "country": "DE", "purpose": "marketing"},
                }
            ]
        },
    )


class RolloutCounts(BaseModel):
    intents: int = Field(description="Created in the window, in the scope")
    waiting: int = Field(description="not decided yet: pending or due again")
    decided: int = Field(description="Decided by a claim: every state but pending and due again")
    shadowed: int = Field(description="decided in shadow mode: the live system's")
    sent: int = Field(description="accepted by a provider")
    delivered: int = Field(description="Delivered, by receipt or lookup")
    failed: int = Field(description="Failed for good")
    unknown: int = Field(description="outcome unknown: resolve before the next step")
    in_flight: int = Field(description="sending, accepted or reconciling")
    not_sent: int = Field(description="refused by the policy, expired or canceled")


class RolloutReport(BaseModel):
    tenant: str = Field(description="The tenant counted")
    scope: ControlScope = Field(description="The scope counted; null fields: all")
    since: str = Field(description="The window's start")
    until: str | None = Field(description="The window's end; null: now")
    as_of: str = Field(description="when the report was made")
    shadow_mode: bool = Field(description="the shadow control of exactly this scope is on")
    live_percent: int | None = Field(description="its live cohort; null when never set")
    counts: RolloutCounts = Field(description="The scope's intents by where they stand")
    settled: bool = Field(description="nothing waiting and nothing in flight")
