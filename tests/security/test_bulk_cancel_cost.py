"""Issue #39, finding 9: what one bulk cancel may cost.

A bulk cancel (`POST /v1/intents/cancel`) is one request and spends one
token of its tenant's rate, however many intents it moves; so its search
must not be linear in everything the tenant ever sent. The job and
recipient filters had indexes; the event class and correlation id
filters had none, so each such cancel read all of the tenant's intents.
The plans are checked on a tenant with 20,000 intents, analyzed: each
filter must find its rows through an index that names it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest

from tests.conftest import TEST_SECRET, publish_example_policy
from tests.databases import clone_database, drop_database
from tests.integration.dispatch_helpers import offer, publish_offer_template
from tests.security.key_support import auth, client, new_key
from tidings import ManualClock, Tidings
from tidings.api.settings import ApiSettings
from tidings.store.queries import q

FILTERS = {
    "event_class": "class-7",
    "correlation_id": "order-7",
    "recipient_ref": "member-7",
    "job_id": UUID(int=7),
}


def index_conditions(node: dict[str, Any]) -> list[str]:
    found = [str(node[k]) for k in ("Index Cond", "Recheck Cond") if k in node]
    for child in node.get("Plans", []):
        found += index_conditions(child)
    return found


@pytest.fixture(scope="module")
def many_intents(pg_server_url: str, template_db: str) -> Iterator[str]:
    """20,000 intents of the `default` tenant, copies of one real intent
    spread over 50 event classes, 2,000 recipients and 500 correlation ids;
    made once for the module's cases, in a database of its own."""
    name, db_url = clone_database(pg_server_url, template_db)
    with Tidings(db_url, clock=ManualClock(), secret_key=TEST_SECRET) as t:
        publish_example_policy(t)
        publish_offer_template(t)
        offer(t, 1)
    with psycopg.connect(db_url, autocommit=True) as conn:
        # A thousand at a time, each its own transaction: one transaction of
        # half a minute holds the server's horizon, which tests beside this
        # one wait for (observability_helpers.past_the_horizon).
        for first in range(1, 20001, 1000):
            conn.execute(
                """
                INSERT INTO intents
                SELECT (jsonb_populate_record(NULL::intents, to_jsonb(i) || jsonb_build_object(
                    'id', gen_random_uuid(), 'idempotency_key', 'copy:' || g,
                    'event_class', 'class-' || g %% 50, 'recipient_ref', 'member-' || g %% 2000,
                    'correlation_id', 'order-' || g %% 500))).*
                FROM (SELECT * FROM intents ORDER BY created_at LIMIT 1) i,
                     generate_series(%s::int, %s::int) g
                """,
                [first, first + 999],
            )
        conn.execute("ANALYZE intents")
    yield db_url
    drop_database(pg_server_url, name)


@pytest.mark.parametrize("query", ["cancel_candidates", "count_final_matching"])
@pytest.mark.parametrize("column", sorted(FILTERS))
def test_each_bulk_cancel_filter_is_found_through_an_index(
    many_intents: str, query: str, column: str
) -> None:
    if query == "cancel_candidates" and column == "job_id":
        query = "cancel_candidates_in_job"  # a job's batches go in id order (cancel_many.py)
    params: dict[str, Any] = {k: None for k in FILTERS}
    params.update({"tenant_id": "default", "after_at": None, "after_id": UUID(int=0)})
    params["limit"] = 500
    params[column] = FILTERS[column]
    with psycopg.connect(many_intents, autocommit=True) as conn:
        row = conn.execute(f"EXPLAIN (FORMAT JSON) {q(query)}", params).fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    conditions = index_conditions(plan)
    assert any(column in c for c in conditions), json.dumps(plan, indent=1)


def test_a_bulk_cancel_spends_one_token_however_many_it_moves(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    for n in range(1, 8):
        offer(tidings, n, event_class="spin-771")
    key = new_key(tidings, "default", ["send", "read"])
    engine = Tidings(db_url, clock=clock, secret_key=TEST_SECRET)
    try:
        http = client(engine, ApiSettings(api_rate_per_second=1, api_rate_burst=2))
        body = {"reason": "class_canceled", "event_class": "spin-771"}
        canceled = http.post("/v1/intents/cancel", json=body, headers=auth(key))
        assert canceled.status_code == 200 and canceled.json()["canceled"] == 7, canceled.text
        assert http.get("/v1/events", headers=auth(key)).status_code == 200  # the second token
        assert http.get("/v1/events", headers=auth(key)).status_code == 429
    finally:
        engine.close()
