"""Create-to-provider-call latencies, shared by scenario 4's two loads.

The latency of one intent is the provider's receipt of the call (the
simulator ledger's `received_at`) minus the intent's `created_at`, both
from this machine's clock. The first second is warm-up (template cache,
prepared statements) and is left out.
"""

from __future__ import annotations

from datetime import datetime
from typing import LiteralString

import psycopg

from bench.model import ScenarioResult

SHORT = 0.95  # offered below this share of the rate asked: a lighter load than asked
WARM_UP_S = 1.0


def latencies(dsn: str, received: dict[str, datetime]) -> list[float]:
    """Sorted milliseconds from creation to the provider's call, by attempt key."""
    query = """
        SELECT a.attempt_key, i.created_at FROM attempts a
        JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
        WHERE a.n = 1 AND i.idempotency_key LIKE 'bench:latency:%'
    """
    return _to_receipt(dsn, received, query)


def mark_windows(dsn: str, received: dict[str, datetime]) -> list[float]:
    """Sorted milliseconds from an attempt's durable call-started mark to the
    provider's receipt of its call: the window invariant 3 leaves, in which
    a crash makes the outcome unknown (reconciled, never resent)."""
    query = """
        SELECT a.attempt_key, a.call_started_at FROM attempts a
        JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
        WHERE a.call_started_at IS NOT NULL AND i.idempotency_key LIKE 'bench:latency:%'
    """
    return _to_receipt(dsn, received, query)


def _to_receipt(dsn: str, received: dict[str, datetime], query: LiteralString) -> list[float]:
    """Sorted milliseconds from each `(attempt_key, at)` row of `query` to
    the provider's receipt of that attempt's call; the first WARM_UP_S
    seconds of `at` are left out."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(query).fetchall()
    first = min((at for _, at in rows), default=None)
    samples = [
        (received[key] - at).total_seconds() * 1000
        for key, at in rows
        if key in received and first and (at - first).total_seconds() >= WARM_UP_S
    ]
    return sorted(samples)


def shortfall(result: ScenarioResult, asked: float, offered: list[float], load: str) -> None:
    """A note naming the repetitions whose producers fell short of the rate asked."""
    short = [(i, x) for i, x in enumerate(offered, 1) if x < SHORT * asked]
    if short:
        which = ", ".join(
            f"repetition {i}: {x:.0f}/s ({1 - x / asked:.0%} short)" for i, x in short
        )
        result.notes.append(
            f"the producers fell more than {1 - SHORT:.0%} short of the {asked:.0f}/s asked in "
            f"{which}; those latencies are for a lighter load than {load}"
        )
