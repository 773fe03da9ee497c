"""Bodies and answers of the bulk cancels (a job, or a filter)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tidings.api.schemas.common import RequestModel, Text
from tidings.domain.cancellation import CancelReason


class CancelManyIn(RequestModel):
    """Every open intent matching all the given filters (at least one)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"reason": "class_canceled", "event_class": "spin-771"}]},
    )

    reason: CancelReason = Field(
        description="Why: member_left, class_canceled, spot_claimed, deadline or operator"
    )
    event_class: Text | None = Field(
        default=None,
        max_length=200,
        description="Cancel only intents of this event class; null: any",
    )
    recipient_ref: Text | None = Field(
        default=None, max_length=200, description="Cancel only intents to this recipient; null: any"
    )
    correlation_id: Text | None = Field(
        default=None,
        max_length=200,
        description="Cancel only intents with this correlation id; null: any",
    )


class CancelCountsOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"canceled": 41, "already_final": 3}]}
    )

    canceled: int = Field(description="Intents this request moved to canceled")
    already_final: int = Field(
        description="Matching intents already final (delivered, canceled, ...): left as they are"
    )
