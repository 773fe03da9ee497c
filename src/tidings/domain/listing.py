"""Finding intents: the filter, the page and its cursor (docs/finding.md).

A listing walks a tenant's intents newest first by (created_at, id). The
cursor is the last row's pair, opaque to callers: a page read with it
starts right after that row, whatever was created since, so paging is
stable while intents keep arriving (new ones land before the first page).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar
from uuid import UUID

from tidings.domain.errors import InvalidInput
from tidings.domain.states import IntentState

MAX_PAGE = 200
DEFAULT_PAGE = 50

T = TypeVar("T")


@dataclass(frozen=True)
class IntentFilter:
    """All given fields must match; None is not filtered on."""

    idempotency_key: str | None = None
    recipient_ref: str | None = None
    event_class: str | None = None
    state: str | None = None
    correlation_id: str | None = None
    created_from: datetime | None = None  # inclusive
    created_to: datetime | None = None  # exclusive

    def __post_init__(self) -> None:
        if self.state is not None and self.state not in {s.value for s in IntentState}:
            raise InvalidInput("state", f"no intent state {self.state!r}")
        for name in ("created_from", "created_to"):
            at = getattr(self, name)
            if at is not None and at.tzinfo is None:
                raise InvalidInput(name, "needs a UTC offset")


@dataclass(frozen=True)
class Cursor:
    """Where the previous page ended: its last row's creation time and id."""

    created_at: datetime
    id: UUID

    def encode(self) -> str:
        raw = f"{self.created_at.isoformat()}|{self.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            at, _, ident = raw.partition("|")
            created = datetime.fromisoformat(at)
            if created.tzinfo is None:
                raise ValueError("naive")
            return cls(created, UUID(ident))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise InvalidInput("cursor", "not a cursor this API gave") from None


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; `next_cursor` is None on the last page."""

    items: Sequence[T] = field(default_factory=tuple)
    next_cursor: str | None = None


def page_size(limit: int | None) -> int:
    size = DEFAULT_PAGE if limit is None else limit
    if not 1 <= size <= MAX_PAGE:
        raise InvalidInput("limit", f"must be between 1 and {MAX_PAGE}")
    return size
