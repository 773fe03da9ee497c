"""A rollout step's counts, for the cohort report (rollout.sql)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.rollout import Scope
from tidings.store.database import Row, fetch_one

Conn = psycopg.Connection[Any]


def counts(conn: Conn, tenant: str, scope: Scope, since: datetime, until: datetime) -> Row:
    """The scope's intents created in [since, until), by where they stand;
    '' in the scope covers all."""
    row = fetch_one(
        conn,
        "rollout_counts",
        {
            "tenant_id": tenant,
            "since": since,
            "until": until,
            "channel": scope.channel or None,
            "country": scope.country.upper() or None,
            "purpose": scope.purpose or None,
            "event_class": scope.event_class or None,
        },
    )
    assert row is not None  # an aggregate always answers
    return row
