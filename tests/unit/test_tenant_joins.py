"""No named query joins two tenants' rows (docs/scaling.md, Citus).

Every named query is parsed by PostgreSQL's own parser (pglast); any join,
correlated subquery or `IN (SELECT ...)` between tenant tables must equate
their tenant_id (tests/unit/tenant_joins.py). A query may still read every
tenant (a sweep, a metric): that is a multi-shard scan, not a join.
"""

from __future__ import annotations

from importlib import resources

import pytest
from pglast import ast, parse_sql

from tidings.store.queries import all_queries

from .tenant_joins import JoinChecker, parse_named

# No statement changes a row's tenant. An observation that arrived before
# its attempt was known waits in unmatched_observations (under the tenant
# the receipt named, or none); once matched, `observation_matched` deletes
# it there and inserts it into observations under the attempt's tenant:
# on Citus, a move between shards that is already written as one.
RETENANTING: set[str] = set()

# Queries that run per intent or per batch on the dispatch and intake paths
# (docs/scaling.md, "Which queries stay on one shard").
HOT_PATH = {
    "claim_due", "claim_one", "attempts_call_started", "heartbeat", "shadow_controls",
    "transition_many", "open_attempts", "record_observation", "observation_effect",
    "attempts_by_reference", "create_intent", "intent_by_key", "intent_by_id",
    "due_checks", "reschedule_check", "expired_leases", "passed_deadlines",
}  # fmt: skip


def tenant_tables() -> set[str]:
    schema = resources.files("tidings.store").joinpath("sql", "schema.sql").read_text()
    found = set()
    for raw in parse_sql(schema):
        stmt = raw.stmt
        if isinstance(stmt, ast.CreateStmt):
            columns = {e.colname for e in stmt.tableElts or () if isinstance(e, ast.ColumnDef)}
            if "tenant_id" in columns:
                found.add(stmt.relation.relname)
    return found


@pytest.fixture(scope="module")
def checker() -> JoinChecker:
    tables = tenant_tables()
    assert {"intents", "attempts", "observations", "transitions", "events"} <= tables
    return JoinChecker(tables)


def test_no_named_query_joins_across_tenants(checker: JoinChecker) -> None:
    queries = all_queries()
    assert set(queries) >= HOT_PATH, "a hot-path query was renamed: update the list"
    problems = {
        name: found for name, sql in queries.items() if (found := checker.check(parse_named(sql)))
    }
    assert problems == {}


def test_only_the_named_query_changes_a_rows_tenant() -> None:
    changing = set()
    for name, sql in all_queries().items():
        for raw in parse_named(sql):
            for node in _statements(raw.stmt):
                if isinstance(node, ast.UpdateStmt) and any(
                    t.name == "tenant_id" for t in node.targetList
                ):
                    changing.add(name)
    assert changing == RETENANTING


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM intents i JOIN attempts a ON a.intent_id = i.id",
        "SELECT * FROM intents i JOIN attempts a"
        " ON a.intent_id = i.id OR a.tenant_id = i.tenant_id",
        "SELECT * FROM intents i WHERE EXISTS (SELECT 1 FROM attempts a WHERE a.intent_id = i.id)",
        "SELECT * FROM intents WHERE id IN (SELECT intent_id FROM attempts)",
        "SELECT (SELECT d.ciphertext FROM destinations d"
        " WHERE d.destination_hash = i.destination_hash) FROM intents i",
        "WITH x AS (SELECT tenant_id, id FROM intents)"
        " DELETE FROM attempts a USING x WHERE a.intent_id = x.id",
        "SELECT * FROM intents i, attempts a WHERE a.intent_id = i.id"
        " AND i.tenant_id = %(t)s AND a.tenant_id = %(u)s",
    ],
)
def test_the_checker_finds_a_join_that_misses_tenant_id(checker: JoinChecker, sql: str) -> None:
    assert checker.check(parse_named(sql)) != []


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM intents i JOIN attempts a USING (tenant_id) WHERE a.intent_id = i.id",
        "SELECT * FROM intents i WHERE EXISTS (SELECT 1 FROM attempts a"
        " WHERE a.tenant_id = i.tenant_id AND a.intent_id = i.id)",
        "SELECT * FROM intents i, attempts a WHERE a.intent_id = i.id"
        " AND i.tenant_id = %(t)s AND a.tenant_id = %(t)s",
        "UPDATE intents SET state = 'x' WHERE (tenant_id, id) IN"
        " (SELECT tenant_id, intent_id FROM attempts)",
    ],
)
def test_the_checker_accepts_tenant_joins(checker: JoinChecker, sql: str) -> None:
    assert checker.check(parse_named(sql)) == []


def _statements(node: ast.Node) -> list[ast.Node]:
    found = [node]
    with_clause = getattr(node, "withClause", None)
    for cte in with_clause.ctes if with_clause else ():
        found.extend(_statements(cte.ctequery))
    return found
