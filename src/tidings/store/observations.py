"""Observations: what providers told us about attempts, matched or not yet.

The one door to `observations` and `unmatched_observations` besides the
retention purge (store/retention.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]


def wait_for_recording(conn: Conn, providers: Sequence[str], ids: Sequence[str]) -> None:
    """Wait for any worker still recording one of these (provider, id) pairs."""
    execute(conn, "provider_ids_recording", {"providers": list(providers), "ids": list(ids)})


def note_unseen(conn: Conn, providers: Sequence[str], ids: Sequence[str]) -> None:
    """Pushed provider ids no attempt shows yet (dispatch/observe.py)."""
    execute(conn, "provider_ids_unseen", {"providers": list(providers), "ids": list(ids)})


def record(conn: Conn, row: Mapping[str, Any], *, matched: bool) -> Row | None:
    """Store one observation; None when it was already stored (a duplicate)."""
    return fetch_one(conn, "record_observation" if matched else "record_unmatched_observation", row)


def note_effect(
    conn: Conn, tenant_id: str, intent_id: UUID | None, id: Any, effect: str, *, matched: bool
) -> None:
    execute(
        conn,
        "observation_effect" if matched else "unmatched_observation_effect",
        {"tenant_id": tenant_id, "intent_id": intent_id, "id": id, "effect": effect},
    )


def unmatched_for(conn: Conn, provider: str, provider_message_id: str) -> list[Row]:
    return fetch_all(
        conn, "unmatched_for", {"provider": provider, "provider_message_id": provider_message_id}
    )


def matched(
    conn: Conn,
    *,
    tenant_id: str,
    intent_id: UUID,
    attempt_n: int,
    channel: str,
    effect: str,
    old_tenant_id: str,
    id: Any,
) -> None:
    """Move an unmatched observation to the attempt it now matches."""
    execute(
        conn,
        "observation_matched",
        {
            "tenant_id": tenant_id,
            "intent_id": intent_id,
            "attempt_n": attempt_n,
            "channel": channel,
            "effect": effect,
            "old_tenant_id": old_tenant_id,
            "id": id,
        },
    )
