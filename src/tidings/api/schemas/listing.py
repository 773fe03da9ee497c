"""The page GET /v1/intents answers (docs/finding.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tidings.api.schemas.intents import IntentOut
from tidings.domain.intent import Intent
from tidings.domain.listing import Page


class CreateWarning(BaseModel):
    code: str = Field(description="POLICY_MISSING: the intent will be denied as things stand")
    detail: str = Field(description="What it means and how to fix it")


class IntentCreatedOut(IntentOut):
    """A create's answer: the intent, and what will stop it if nothing changes
    (issue #40, item 6; the same code in the `Tidings-Warning` header)."""

    warnings: list[CreateWarning] = Field(
        default_factory=list, description="Empty when nothing is known to stop the intent"
    )


class IntentPageOut(BaseModel):
    items: list[IntentOut] = Field(description="The matching intents, newest first")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page"
    )

    @classmethod
    def of(cls, page: Page[Intent]) -> IntentPageOut:
        return cls(items=[IntentOut.of(i) for i in page.items], next_cursor=page.next_cursor)
