"""Finding intents (issue #40, item 4): GET /v1/intents and
`Tidings.list_intents`, their filters, a stable cursor, a page that costs a
page, and a tenant that never sees another's intents."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tidings import ManualClock, Page, Tidings
from tidings.domain.errors import InvalidInput
from tidings.store.queries import q

from .api_support import TENANT, auth, client, intent_body, new_key, publish_offer


def _create(api: TestClient, t: Tidings, n: int, **overrides: Any) -> dict[str, Any]:
    answer = api.post("/v1/intents", json=intent_body(t, n, **overrides))
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def _ids(answer: Any) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [item["id"] for item in answer.json()["items"]]


def test_each_filter_finds_only_its_intents(
    api: TestClient, tidings: Tidings, clock: ManualClock
) -> None:
    made = []
    for n in range(4):
        made.append(_create(api, tidings, n, correlation_id=f"booking-{n % 2}"))
        clock.advance(seconds=10)
    newest_first = [m["id"] for m in reversed(made)]
    assert _ids(api.get("/v1/intents")) == newest_first
    key = made[2]["idempotency_key"]
    assert _ids(api.get("/v1/intents", params={"idempotency_key": key})) == [made[2]["id"]]
    ref = made[1]["recipient_ref"]
    assert _ids(api.get("/v1/intents", params={"recipient_ref": ref})) == [made[1]["id"]]
    odd = api.get("/v1/intents", params={"correlation_id": "booking-1"})
    assert _ids(odd) == [made[3]["id"], made[1]["id"]]
    assert _ids(api.get("/v1/intents", params={"event_class": "waitlist_offer"})) == newest_first
    assert _ids(api.get("/v1/intents", params={"event_class": "other"})) == []
    assert _ids(api.get("/v1/intents", params={"state": "pending"})) == newest_first
    assert _ids(api.get("/v1/intents", params={"state": "delivered"})) == []
    since = made[1]["created_at"]
    until = made[3]["created_at"]
    window = api.get("/v1/intents", params={"created_from": since, "created_to": until})
    assert _ids(window) == [made[2]["id"], made[1]["id"]]
    both = {"correlation_id": "booking-1", "created_to": until}
    assert _ids(api.get("/v1/intents", params=both)) == [made[1]["id"]]


def test_the_cursor_is_stable_while_intents_keep_arriving(
    api: TestClient, tidings: Tidings, clock: ManualClock
) -> None:
    # Ties on created_at are broken by id: five share one moment.
    made = [_create(api, tidings, n)["id"] for n in range(5)]
    clock.advance(seconds=1)
    made += [_create(api, tidings, n)["id"] for n in range(5, 8)]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        answer = api.get("/v1/intents", params=params)
        seen += _ids(answer)
        pages += 1
        # One created between pages lands before the first page, not in them.
        clock.advance(seconds=1)
        _create(api, tidings, 100 + pages)
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(seen) == sorted(made) and len(seen) == len(set(seen))


def test_library_returns_a_page_and_refuses_a_bad_cursor(api: TestClient, tidings: Tidings) -> None:
    first = _create(api, tidings, 1)
    _create(api, tidings, 2)
    acme = tidings.for_tenant(TENANT)
    page = acme.list_intents(limit=1)
    assert isinstance(page, Page) and len(page.items) == 1 and page.next_cursor
    rest = acme.list_intents(limit=1, cursor=page.next_cursor)
    assert [str(i.id) for i in rest.items] == [first["id"]] and rest.next_cursor is None
    with pytest.raises(InvalidInput):
        acme.list_intents(cursor="not-a-cursor")
    bad = api.get("/v1/intents", params={"cursor": "bm90IGEgY3Vyc29y"})
    assert bad.status_code == 422 and bad.json()["code"] == "INVALID_INPUT"
    assert api.get("/v1/intents", params={"state": "nope"}).status_code == 422


def test_a_tenant_never_sees_another_tenants_intents(api: TestClient, tidings: Tidings) -> None:
    theirs = _create(api, tidings, 1)
    publish_offer(tidings, "other")
    other = client(tidings)
    other.headers.update(auth(new_key(tidings, "other")))
    assert _ids(other.get("/v1/intents")) == []
    key = {"idempotency_key": theirs["idempotency_key"]}
    assert _ids(other.get("/v1/intents", params=key)) == []
    ref = {"recipient_ref": theirs["recipient_ref"]}
    assert _ids(other.get("/v1/intents", params=ref)) == []
    assert tidings.for_tenant("other").list_intents().items == ()
    mine = _create(other, tidings, 1)
    assert _ids(other.get("/v1/intents")) == [mine["id"]]
    assert _ids(api.get("/v1/intents")) == [theirs["id"]]


def _explain(conn: psycopg.Connection[Any], params: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = dict.fromkeys(
        (
            "idempotency_key",
            "recipient_ref",
            "event_class",
            "state",
            "correlation_id",
            "created_from",
            "created_to",
            "after_at",
            "after_id",
        ),
    )
    sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)\n" + q("list_intents")
    with psycopg.ClientCursor(conn) as cur:
        cur.execute(sql.encode(), {**base, **params})
        row = cur.fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return dict(plan[0]["Plan"])


def _nodes(plan: dict[str, Any]) -> list[str]:
    here = f"{plan['Node Type']} {plan.get('Index Name', '')}".strip()
    return [here, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


@pytest.mark.parametrize(
    "leading",
    [
        {},
        {"recipient_ref": "bulk-7"},
        {"event_class": "waitlist_offer"},
        {"state": "pending"},
        {"correlation_id": "c-3"},
    ],
)
def test_a_page_costs_a_page(
    api: TestClient, tidings: Tidings, db_url: str, leading: dict[str, Any]
) -> None:
    seed = _create(api, tidings, 1)
    with psycopg.connect(db_url, autocommit=True) as conn:
        # 20,000 intents of the tenant, copies of one, spread over recipients,
        # correlation ids and time.
        conn.execute(
            # (r).* over a subquery kept apart (OFFSET 0): written as
            # (f(...)).* the record is built once per column, not per row.
            "INSERT INTO intents SELECT (r).* FROM (SELECT jsonb_populate_record(i,"
            " jsonb_build_object('id', gen_random_uuid(), 'idempotency_key', 'bulk:' || g,"
            " 'recipient_ref', 'bulk-' || g %% 100, 'correlation_id', 'c-' || g %% 50,"
            " 'created_at', i.created_at - g * interval '1 second')) AS r"
            " FROM intents i, generate_series(1, 20000) g WHERE i.id = %s OFFSET 0) copies",
            (seed["id"],),
        )
        conn.execute("ANALYZE intents")
        plan = _explain(conn, {"tenant_id": TENANT, "limit": 21, **leading})
        pages = conn.execute("SELECT relpages FROM pg_class WHERE relname = 'intents'").fetchone()
    nodes = _nodes(plan)
    assert not any(n.startswith(("Sort", "Seq Scan")) for n in nodes), nodes
    # A few buffers per row of the page (an index entry, its heap row), far
    # from the tenant's thousand-odd pages.
    blocks = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    assert plan["Actual Rows"] == 21 and blocks <= 8 * 21, (blocks, nodes)
    assert pages is not None and pages[0] > 1000, pages


def test_created_range_needs_an_offset(tidings: Tidings) -> None:
    naive = tidings.clock.now().replace(tzinfo=None) - timedelta(days=1)
    with pytest.raises(InvalidInput):
        tidings.list_intents(created_from=naive)
