"""The schema still distributes on Citus by tenant_id (docs/scaling.md).

Read from the catalog of a migrated database, so a new migration that
breaks a rule fails here: every table carries tenant_id except the
reference tables named below; every primary key, unique constraint and
unique index of a tenant table includes tenant_id; every foreign key
between tenant tables matches tenant_id to tenant_id, and none points from
a reference table at a tenant table.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

# Tables with no tenant, replicated whole to every node on Citus. Each is
# small and written rarely; the reason is in docs/scaling.md.
REFERENCE_TABLES = {
    # One row per cross-tenant periodic task (the alert round): which worker
    # runs it this interval, for all tenants at once. A tenant key would
    # mean one round per tenant, each scanning the whole ledger.
    "alert_rounds",
    # One row per provider account that said "back off": the account is the
    # deployment's, shared by every tenant, and every claim reads its row.
    "provider_pauses",
    # One row per month of evidence partitions: the partitions are the
    # deployment's, each holding every tenant's evidence of that month.
    "evidence_months",
    # One row: how far the transition audit's folds went, for all tenants at
    # once (a fold per tenant would be one per tenant a scrape).
    "transition_audit_mark",
    # The synthetic canaries' answers, per provider account and channel:
    # like provider_pauses, the accounts are the deployment's, and one
    # worker writes a round for all tenants at once.
    "canary_results",
}
# Bookkeeping of the migration runner, created on the coordinator only.
LOCAL_TABLES = {"schema_migrations"}

TABLES = """
SELECT c.relname, bool_or(a.attname = 'tenant_id') AS has_tenant
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
GROUP BY c.relname ORDER BY c.relname
"""

UNIQUE_KEYS = """
SELECT t.relname AS table_name, i.relname AS index_name,
       array_agg(a.attname ORDER BY k.ord) FILTER (WHERE a.attname IS NOT NULL) AS columns,
       x.indexprs IS NOT NULL AS has_expressions
FROM pg_index x
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_class i ON i.oid = x.indexrelid
CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
WHERE t.relnamespace = 'public'::regnamespace AND x.indisunique AND NOT t.relispartition
GROUP BY t.relname, i.relname, x.indexprs ORDER BY 1, 2
"""

FOREIGN_KEYS = """
SELECT c.conname, src.relname AS from_table, dst.relname AS to_table,
       array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o)
           AS from_columns,
       array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)
           AS to_columns
FROM pg_constraint c
JOIN pg_class src ON src.oid = c.conrelid
JOIN pg_class dst ON dst.oid = c.confrelid
WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
  AND c.conparentid = 0 AND NOT src.relispartition
ORDER BY 1
"""


def catalog(url: str, sql: str) -> list[dict[str, Any]]:
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute(sql).fetchall()


def tables_by_kind(url: str) -> set[str]:
    """The tenant tables; fails when a table without tenant_id is not named."""
    rows = catalog(url, TABLES)
    without = {r["relname"] for r in rows if not r["has_tenant"]} - LOCAL_TABLES
    assert without == REFERENCE_TABLES, "a table without tenant_id must be a named reference table"
    return {r["relname"] for r in rows if r["has_tenant"]}


def unique_key_problems(url: str, tenant_tables: set[str]) -> list[str]:
    keys = [r for r in catalog(url, UNIQUE_KEYS) if r["table_name"] in tenant_tables]
    assert len(keys) > 20  # the query sees the schema's keys
    return [
        r["index_name"]
        for r in keys
        if "tenant_id" not in (r["columns"] or []) or r["has_expressions"]
    ]


def foreign_key_problems(url: str, tenant_tables: set[str]) -> list[str]:
    keys = catalog(url, FOREIGN_KEYS)
    assert len(keys) > 10
    broken = []
    for fk in keys:
        source_is_tenant = fk["from_table"] in tenant_tables
        target_is_tenant = fk["to_table"] in tenant_tables
        if not source_is_tenant and target_is_tenant:
            broken.append(f"{fk['conname']}: a reference table points at a tenant table")
        elif source_is_tenant and target_is_tenant:
            pairs = dict(zip(fk["from_columns"], fk["to_columns"], strict=True))
            if pairs.get("tenant_id") != "tenant_id":
                broken.append(f"{fk['conname']}: tenant_id is not matched to tenant_id")
    return broken


def test_every_unique_key_of_a_tenant_table_includes_tenant_id(db_url: str) -> None:
    assert unique_key_problems(db_url, tables_by_kind(db_url)) == []


def test_every_foreign_key_matches_tenant_to_tenant(db_url: str) -> None:
    assert foreign_key_problems(db_url, tables_by_kind(db_url)) == []


def test_the_rules_catch_keys_that_break_them(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE UNIQUE INDEX intents_id_alone ON intents (id)")
        conn.execute(
            "CREATE UNIQUE INDEX intents_lower_key ON intents (tenant_id, lower(idempotency_key))"
        )
        conn.execute(
            "ALTER TABLE observations ADD CONSTRAINT observations_cross "
            "FOREIGN KEY (intent_id) REFERENCES intents (id)"
        )
        conn.execute("CREATE TABLE stray (id int PRIMARY KEY)")
    with pytest.raises(AssertionError, match="reference table"):
        tables_by_kind(db_url)
    tables = {r["relname"] for r in catalog(db_url, TABLES) if r["has_tenant"]}
    assert sorted(unique_key_problems(db_url, tables)) == ["intents_id_alone", "intents_lower_key"]
    assert foreign_key_problems(db_url, tables) == [
        "observations_cross: tenant_id is not matched to tenant_id"
    ]
