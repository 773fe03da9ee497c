"""Reading the evidence at the end of a run: the rows, the simulator's
ledger and receipts, and the projections served over HTTP.

The order matters while stragglers still arrive: receipts, then the
provider's ledger, then the rows, then the ledger again. A receipt or a
request in the first reads was committed or claimed before the rows were
read; every acceptance the rows mention is in the last read.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families
from psycopg.rows import dict_row

from harness.wires import ours
from tidings.domain.keys import intent_of_attempt_key

from .invariants import Row, Snapshot
from .processes import call

# Projections are compared with rows read right after them; while anything
# still moves they can differ for a moment, so a mismatch is read again.
PROJECTION_READS = 10
# Between two reads of a projection and its rows: a lookup or a late receipt
# may still move an intent after the run settled.
PROJECTION_PAUSE_S = 0.3


def take(
    db_url: str, sim_url: str, api_url: str, api_key: str, jobs: list[str], metrics_url: str
) -> Snapshot:
    # Receipts first: one the API acknowledged before the rows are read must be
    # in them (a straggler acknowledged later would look lost).
    receipts = _get(f"{sim_url}/_receipts")
    ledger_before = _ours(_get(f"{sim_url}/_ledger"))
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        now = datetime.now(UTC)
        intents = _rows(
            conn,
            "SELECT id, tenant_id, state, version, expires_at, resend_budget, attempt_count,"
            " next_due_at, lease_owner, lease_expires_at, job_id FROM intents",
        )
        attempts = _rows(
            conn,
            "SELECT tenant_id, intent_id, n, attempt_key, channel, provider, state, code,"
            " provider_message_id, accepted_at, next_check_at, call_started_at FROM attempts",
        )
        transitions = _rows(
            conn,
            "SELECT intent_id, version, from_state, to_state, event, at, decision_code,"
            " input->>'attempt' AS attempt FROM transitions",
        )
        observations = _rows(
            conn,
            "SELECT tenant_id, dedupe_key, source, intent_id, effect, provider_message_id,"
            " raw_status, received_at, raw FROM observations"
            # Receipts that never matched an attempt are kept apart (0026).
            " UNION ALL SELECT tenant_id, dedupe_key, source, NULL, effect,"
            " provider_message_id, raw_status, received_at, raw FROM unmatched_observations",
        )
        conn.rollback()
    return Snapshot(
        now=now,
        intents=intents,
        attempts=attempts,
        transitions=transitions,
        observations=observations,
        ledger_before=_by_message_id(ledger_before, attempts),
        ledger_after=_by_message_id(_ours(_get(f"{sim_url}/_ledger")), attempts),
        receipts=receipts,
        job_counts={j: _job_counts(db_url, api_url, api_key, j) for j in jobs},
        metric_counts=_metric_counts(db_url, metrics_url),
        profiles=_get_object(f"{sim_url}/_profiles"),
        wire=_wire(sim_url),
    )


def _job_counts(
    db_url: str, api_url: str, key: str, job_id: str
) -> tuple[dict[str, int], dict[str, int]]:
    sql = "SELECT state, count(*) AS n FROM intents WHERE job_id = %s GROUP BY state"
    for _ in range(PROJECTION_READS):
        auth = {"Authorization": f"Bearer {key}"}
        answer = call("GET", f"{api_url}/v1/jobs/{job_id}", headers=auth)
        api = answer.json()["counts"] if answer is not None and answer.status_code == 200 else {}
        rows = _counts(db_url, sql, (job_id,))
        if api == rows:
            break
        time.sleep(PROJECTION_PAUSE_S)  # real processes are still settling
    return api, rows


def _metric_counts(db_url: str, metrics_url: str) -> tuple[dict[str, int], dict[str, int]] | None:
    sql = "SELECT state, count(*) AS n FROM intents GROUP BY state"
    metrics: dict[str, int] = {}
    rows: dict[str, int] = {}
    for _ in range(PROJECTION_READS):
        answer = call("GET", metrics_url)
        if answer is None or answer.status_code != 200:
            return None
        metrics = {}
        for family in text_string_to_metric_families(answer.text):
            if family.name == "tidings_intents":
                for sample in family.samples:
                    # One sample per tenant (and other labels): the rows are
                    # counted over all of them.
                    if sample.value:
                        state = sample.labels["state"]
                        metrics[state] = metrics.get(state, 0) + int(sample.value)
        rows = _counts(db_url, sql, ())
        if metrics == rows:
            return metrics, rows
        time.sleep(PROJECTION_PAUSE_S)  # real processes are still settling
    # Still moving (reconciliation polls go on after the settle): the scrape
    # and the count never saw one moment. Compare what /metrics reads, the
    # kept counts, with the rows in one snapshot instead: exact at any pace.
    return _kept_and_rows(db_url)


def _kept_and_rows(db_url: str) -> tuple[dict[str, int], dict[str, int]]:
    with psycopg.connect(db_url) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        kept = conn.execute(
            "SELECT state, sum(n)::bigint FROM intent_counts GROUP BY state HAVING sum(n) <> 0"
        ).fetchall()
        rows = conn.execute("SELECT state, count(*) FROM intents GROUP BY state").fetchall()
        conn.rollback()
    return {str(k): int(n) for k, n in kept}, {str(k): int(n) for k, n in rows}


def _counts(db_url: str, sql: str, params: tuple[Any, ...]) -> dict[str, int]:
    with psycopg.connect(db_url) as conn:
        found: Counter[str] = Counter()
        for state, n in conn.execute(sql, params).fetchall():  # type: ignore[arg-type]
            found[state] += n
    return dict(found)


def _rows(conn: psycopg.Connection[Any], sql: str) -> list[Row]:
    return list(conn.execute(sql).fetchall())  # type: ignore[arg-type]


def _get(url: str) -> list[Row]:
    return list(_answer(url))


def _get_object(url: str) -> dict[str, Any]:
    """A JSON object's answer (`list()` of it was its keys alone: the
    profiles read as channel names, and the first check to read them failed)."""
    return dict(_answer(url))


def _answer(url: str) -> Any:
    answer = call("GET", url, timeout=60.0)
    if answer is None or answer.status_code != 200:
        raise RuntimeError(f"{url} did not answer")
    return answer.json()


def _wire(sim_url: str) -> bool:
    """Whether the simulator spoke its providers' own wires."""
    answer = call("GET", f"{sim_url}/_config", timeout=60.0)
    return answer is not None and answer.status_code == 200 and bool(answer.json().get("wire"))


def _ours(ledger: list[Row]) -> list[Row]:
    """The ledger with our attempt keys as we wrote them: a provider's own
    wire carries them its way (Vonage's 40-character client-ref compacts
    them, SES's tags escape them: harness/wires.py `ours`)."""
    return [{**e, "idempotency_key": ours(e["idempotency_key"])} for e in ledger]


def _by_message_id(ledger: list[Row], attempts: list[Row]) -> list[Row]:
    """Where a wire carried no key of ours (SNS: harness/wires.py
    `KEYLESS`), a send is its attempt's by the message id the attempt
    recorded; one whose answer was lost keeps the request's own key."""
    named = {a["provider_message_id"]: a["attempt_key"] for a in attempts}
    named.pop(None, None)
    return [
        {**e, "idempotency_key": named[e["provider_message_id"]]}
        if intent_of_attempt_key(e["idempotency_key"]) is None
        and e.get("provider_message_id") in named
        else e
        for e in ledger
    ]
