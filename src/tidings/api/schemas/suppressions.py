"""Suppressions as GET /v1/suppressions answers them: each with its
evidence and its destination's keyed hash, never the destination."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from tidings.domain.listing import Page
from tidings.domain.suppressions import Suppression

Reason = Literal["hard_bounce", "complaint", "operator", "invalid"]


class SuppressionOut(BaseModel):
    id: UUID = Field(description="Name it to lift the suppression")
    state: Literal["active", "lifted"] = Field(
        description="active, or lifted (the destination is sent to again)"
    )
    channel: Literal["sms", "email"] = Field(
        description="The channel the destination is suppressed on"
    )
    destination_hash: str = Field(
        description="The destination's keyed hash, the same for every intent to it"
    )
    reason: Reason = Field(description="What suppressed the destination")
    created_at: datetime = Field(description="When it was suppressed (UTC)")
    provider: str | None = Field(description="The provider whose answer or receipt said so")
    intent_id: UUID | None = Field(description="The intent whose attempt the evidence is from")
    attempt_n: int | None = Field(
        description="The number of the attempt the evidence is from; null when not from an attempt"
    )
    raw_status: str | None = Field(description="The provider's own word, or the reject code")
    recipient_ref: str | None = Field(description="The evidence intent's recipient")
    lifted_at: datetime | None = Field(
        default=None, description="When it was lifted (UTC); null while active"
    )
    lifted_by: str | None = Field(None, description="Who lifted it: an API key's actor, cli")
    lift_reason: str | None = Field(
        default=None, description="Why it was lifted; null while active"
    )

    @classmethod
    def of(cls, s: Suppression) -> SuppressionOut:
        return cls(
            id=s.id,
            state="active" if s.lifted_at is None else "lifted",
            channel=s.channel,  # type: ignore[arg-type]
            destination_hash=s.destination_hash,
            reason=s.reason,  # type: ignore[arg-type]
            created_at=s.created_at,
            provider=s.provider,
            intent_id=s.intent_id,
            attempt_n=s.attempt_n,
            raw_status=s.raw_status,
            recipient_ref=s.recipient_ref,
            lifted_at=s.lifted_at,
            lifted_by=s.lifted_by,
            lift_reason=s.lift_reason,
        )


class SuppressionPageOut(BaseModel):
    items: list[SuppressionOut] = Field(description="The matching suppressions, newest first")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page"
    )

    @classmethod
    def of(cls, page: Page[Suppression]) -> SuppressionPageOut:
        return cls(items=[SuppressionOut.of(s) for s in page.items], next_cursor=page.next_cursor)
