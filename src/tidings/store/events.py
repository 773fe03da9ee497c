"""Application-facing events, read by cursor.

A cursor is the (txid, id) of the last event read, encoded as an opaque
string. Pages hold only events whose transaction finished before every
transaction still running (see the `events_after` query), so reading from
a cursor never skips an event that commits after a later one.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import psycopg

from tidings.domain.errors import InvalidInput
from tidings.store.database import Row, fetch_all

Conn = psycopg.Connection[Any]

MAX_LIMIT = 1000
_VERSION = "e1"


@dataclass(frozen=True, order=True)
class Cursor:
    txid: int
    id: int

    def encode(self) -> str:
        raw = f"{_VERSION}:{self.txid}:{self.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
            version, txid, id_ = raw.split(":")
            cursor = cls(int(txid), int(id_))
        except (binascii.Error, UnicodeError, ValueError):
            raise InvalidInput("after", "not a cursor this server handed out") from None
        if version != _VERSION or not (0 <= cursor.txid < 2**64 and 0 <= cursor.id < 2**63):
            raise InvalidInput("after", "not a cursor this server handed out")
        return cursor


START = Cursor(0, 0)


@dataclass(frozen=True)
class Page:
    items: list[Row]
    next: Cursor  # where to continue from; the same cursor when nothing was new


def page(conn: Conn, tenant: str, after: Cursor = START, limit: int = 100) -> Page:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", f"must be from 1 to {MAX_LIMIT}")
    rows = fetch_all(
        conn,
        "events_after",
        {
            "tenant_id": tenant,
            "txid": str(after.txid),
            "id": after.id,
            "limit": limit,
        },
    )
    last = Cursor(int(rows[-1]["txid"]), rows[-1]["id"]) if rows else after
    return Page(rows, last)
