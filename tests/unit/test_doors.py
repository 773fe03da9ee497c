"""Doors: SQL is named from store/ alone, each store module names the
queries of its own file, and every table that holds state is written
through one store module.

A query is named by its string (`fetch_one(conn, "attempt_settled", ...)`)
from a module that runs queries (imports `fetch_one`, `fetch_all` or
`execute` from tidings.store.database, or `q` from tidings.store.queries,
for a COPY or a scratch table): a string constant elsewhere that
happens to equal a query name (the "suppress" action of domain/policy.py)
names nothing. The tables a query writes are read from its SQL with
PostgreSQL's own parser (pglast): the targets of INSERT, UPDATE, DELETE and
COPY FROM, in common table expressions and the schema's functions too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path

import pglast
from pglast import ast as sql_ast

import tidings
from tidings.store.queries import _parse, all_queries

SRC = Path(tidings.__file__).parent
STORE = SRC / "store"
QUERY_FILES = STORE / "sql" / "queries"
RUNNERS = {"tidings.store.database": {"fetch_one", "fetch_all", "execute"}}
RUNNERS["tidings.store.queries"] = {"q", "all_queries"}

# Each table that holds state, and the one store module that writes it.
DOORS = {
    "tenants": "store/ledger.py",
    "destinations": "store/ledger.py",
    "intents": "store/ledger.py",
    "transitions": "store/ledger.py",
    "events": "store/ledger.py",
    "attempts": "store/attempts.py",
    "observations": "store/observations.py",
    "unmatched_observations": "store/observations.py",
    "jobs": "store/jobs.py",
    "job_recipients": "store/jobs.py",
    "audience_uploads": "store/audience_uploads.py",
    "audience_upload_members": "store/audience_uploads.py",
    "reports": "store/reports.py",
    "rate_counters": "store/rate_counters.py",
    "contacts": "store/contacts.py",
    "consents": "store/contacts.py",
    "opt_outs": "store/contacts.py",
    "suppressions": "store/contacts.py",
    # A lift moves the suppression here in one statement (0035).
    "suppression_lifts": "store/contacts.py",
    "templates": "store/templates.py",
    "policies": "store/policies.py",
    "controls": "store/controls.py",
    "provider_pauses": "store/provider_pauses.py",
    "provider_backoffs": "store/provider_pauses.py",
    "quarantine_log": "store/isolation.py",
    "evidence_months": "store/evidence_partitions.py",
    "event_webhooks": "store/event_webhooks.py",
    "api_keys": "store/api_keys.py",
    "api_rate_buckets": "store/api_rate.py",
    "console_sessions": "store/console_sessions.py",
    "alerts": "store/alerts.py",
    "alert_rounds": "store/alerts.py",
    "canary_results": "store/canaries.py",
    "transition_audit": "store/transition_audit.py",
    "impossible_transitions": "store/transition_audit.py",
    "transition_audit_mark": "store/transition_audit.py",
    "transition_minutes": "store/transition_audit.py",
    # Kept by the schema's triggers (migrations/0033_job_counts.sql), read
    # through this module: see TRIGGER_KEPT.
    "job_counts": "store/job_counts.py",
    # Kept by 0043_intent_counts.sql's triggers; read by the console and a
    # scrape, each through its reads module.
    "intent_counts": "store/console_reads.py",
}

# Tables no query writes: triggers keep them in the transactions that write
# the tables named, so a count can never miss the change it counts.
TRIGGER_KEPT = {
    "job_counts": {"intents", "attempts", "transitions", "observations", "job_recipients"},
    "intent_counts": {"intents"},
}

# Statements that write another door's table, each with its one owner, the
# tables of other doors it writes, and why it cannot go through their door.
SHARED_STATEMENTS = {
    # Leases found expired mid-send: the attempt is settled and its intent
    # moved in one statement, so neither can be seen without the other.
    "quarantine_sending": ("store/attempts.py", {"intents", "transitions"}),
    # Revoking a key ends its console sessions in the revoke's transaction;
    # store/console_sessions.py reads the key's principal from
    # store/api_keys.py, so the revoke cannot call it without a circle.
    "delete_console_sessions_of_keys": ("store/api_keys.py", {"console_sessions"}),
}

# Purges forget rows whose retention clock ran out, in every table at once
# (docs/retention.md): they change no row's meaning, so they have one door
# of their own rather than a purge in each table's.
PURGE_DOOR = "store/retention.py"
# What the purge door writes besides deleting: a job's final counts, kept
# before its evidence goes; an intent's mark that its attempts went.
PURGE_MARKS = {
    "snapshot_job_counts": {"jobs"},
    "purge_attempt_evidence": {"intents"},
    "purge_attempt_evidence_default": {"intents"},
}


def _as_postgres(sql: str) -> str:
    # psycopg's named placeholders are not SQL; the parser needs $n.
    return re.sub(r"%\(\w+\)s|%s", "$1", sql).replace("%%", "%")


def _nodes(node: object) -> Iterator[object]:
    if isinstance(node, sql_ast.Node):
        yield node
        for field in node:
            yield from _nodes(getattr(node, field))
    elif isinstance(node, tuple | list):
        for item in node:
            yield from _nodes(item)


def _schema() -> str:
    return resources.files("tidings.store").joinpath("sql", "schema.sql").read_text()


_KINDS = {"INSERT INTO": "insert", "UPDATE": "update", "DELETE FROM": "delete"}


@cache
def _function_targets() -> dict[str, dict[str, set[str]]]:
    """What each function of the schema writes, read from its body's static
    statements (a partition's rows moved by dynamic SQL stay in their table)."""
    tables = _stateful_tables()
    found: dict[str, dict[str, set[str]]] = {}
    for name, body in re.findall(r"CREATE FUNCTION (\w+)\(.*?\$\$(.*?)\$\$", _schema(), re.S):
        how: dict[str, set[str]] = {}
        for verb, table in re.findall(r"\b(INSERT INTO|UPDATE|DELETE FROM)\s+(\w+)", body):
            if table in tables:
                how.setdefault(_KINDS[verb], set()).add(table)
        found[name] = how
    return found


def _targets(sql: str) -> dict[str, set[str]]:
    """The tables a statement writes, by how: insert, update or delete,
    through the schema's functions it calls too."""
    found: dict[str, set[str]] = {}
    kinds = {
        sql_ast.InsertStmt: "insert",
        sql_ast.UpdateStmt: "update",
        sql_ast.DeleteStmt: "delete",
    }
    for raw in pglast.parse_sql(_as_postgres(sql)):
        for node in _nodes(raw.stmt):
            kind = kinds.get(type(node))
            if kind is not None:
                found.setdefault(kind, set()).add(node.relation.relname)  # type: ignore[attr-defined]
            if isinstance(node, sql_ast.CopyStmt) and node.is_from:
                found.setdefault("copy", set()).add(node.relation.relname)
            if isinstance(node, sql_ast.FuncCall):
                called = node.funcname[-1].sval
                for how, tables in _function_targets().get(called, {}).items():
                    found.setdefault(how, set()).update(tables)
    return found


@cache
def _scratch_tables() -> set[str]:
    """Temporary tables the queries create: rows pass through them in one
    transaction on their way to a table of the schema."""
    found = set()
    for sql in all_queries().values():
        for raw in pglast.parse_sql(_as_postgres(sql)):
            stmt = raw.stmt
            if isinstance(stmt, sql_ast.CreateStmt) and stmt.relation.relpersistence == "t":
                found.add(stmt.relation.relname)
    return found


@cache
def _writes() -> dict[str, set[str]]:
    """Each query that writes a table of the schema, and the tables it writes."""
    written = {name: _targets(sql) for name, sql in all_queries().items()}
    tables = {name: set().union(*how.values()) - _scratch_tables() for name, how in written.items()}
    return {name: found for name, found in tables.items() if found}


@cache
def _stateful_tables() -> set[str]:
    tables = set()
    for raw in pglast.parse_sql(_schema()):
        stmt = raw.stmt
        if isinstance(stmt, sql_ast.CreateStmt) and stmt.partbound is None:
            tables.add(stmt.relation.relname)
    return tables


def _runs_queries(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and any(alias.name in RUNNERS.get(node.module or "", set()) for alias in node.names)
        for node in ast.walk(tree)
    )


@cache
def _named_by_module() -> dict[str, set[str]]:
    """Each module that runs queries, and the query names it holds."""
    names = set(all_queries())
    named = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        if not _runs_queries(tree):
            continue
        named[str(path.relative_to(SRC))] = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in names
        }
    return named


def _queries_of_file(stem: str) -> set[str]:
    return set(_parse((QUERY_FILES / f"{stem}.sql").read_text("utf-8")))


def test_the_parser_finds_the_known_writers() -> None:
    # Guards the tests below: a parser that found nothing would pass them all.
    writes = _writes()
    assert {"intents", "transitions", "events"} <= writes["transition_many"]
    assert {"intents", "transitions", "destinations"} <= writes["create_intent"]
    assert writes["attempt_settled"] == {"attempts"}
    assert writes["consume_allowance"] == {"rate_counters"}
    assert writes["heartbeat"] == {"intents"}
    assert "observations" in writes["purge_intents"]
    assert "claim_due" not in writes  # locks rows, writes none
    assert writes["copy_job_recipients"] == {"job_recipients"}
    assert writes["store_staged_destinations"] == {"destinations"}
    assert {"staged_intents", "staged_destinations"} <= _scratch_tables()
    # through the schema's function purge_attempt_evidence_of
    assert {"attempts", "transitions", "events", "intents"} <= writes["purge_attempt_evidence"]
    assert len(writes) > 60


def test_every_stateful_table_has_a_door() -> None:
    tables = _stateful_tables()
    assert {"intents", "attempts", "jobs", "rate_counters"} <= tables  # not vacuous
    written = set().union(*_writes().values())
    assert written <= tables, "a query writes a table the schema does not declare"
    assert tables == set(DOORS), "name the door of each table the schema declares"


def test_each_table_is_written_through_its_door_alone() -> None:
    named = _named_by_module()
    trespassers = []
    for module, names in named.items():
        for name in names & set(_writes()):
            tables = _writes()[name]
            if module == PURGE_DOOR:
                continue  # checked by the purge test below
            shared = SHARED_STATEMENTS.get(name)
            if shared is not None and shared[0] == module:
                tables = tables - shared[1]
            wrong = {t for t in tables if DOORS[t] != module}
            if wrong:
                trespassers.append(f"{module}: {name} writes {sorted(wrong)}")
    assert not trespassers, "write each table through its store door (DOORS)"


def test_each_door_writes_its_tables() -> None:
    # Not vacuous: every door names at least one query writing each of its tables.
    named = _named_by_module()
    missing = []
    for table, door in DOORS.items():
        if table in TRIGGER_KEPT:
            continue  # checked by test_trigger_kept_tables_are_written_by_triggers
        writers = {n for n in named.get(door, set()) if table in _writes().get(n, set())}
        if not writers:
            missing.append(f"{table}: {door}")
    assert not missing


def test_shared_statements_are_named_by_their_owner_alone() -> None:
    named = _named_by_module()
    for name, (owner, tables) in SHARED_STATEMENTS.items():
        assert tables <= _writes()[name]
        assert {m for m, names in named.items() if name in names} == {owner}


def test_the_purge_door_only_deletes() -> None:
    named = _named_by_module()[PURGE_DOOR]
    purges = {n for n in named if n in _writes()}
    assert {"purge_intents", "purge_attempt_evidence", "purge_jobs"} <= purges
    for name in purges:
        how = _targets(all_queries()[name])
        updated = how.get("update", set()) | how.get("insert", set())
        assert updated <= PURGE_MARKS.get(name, set()), f"{name} writes more than a purge"


def test_sql_is_named_only_from_store() -> None:
    outside = {module for module in _named_by_module() if not module.startswith("store/")}
    assert not outside, "name queries from a store module; call it from here"


def test_each_store_module_names_the_queries_of_its_own_file() -> None:
    strays = []
    for module, names in _named_by_module().items():
        if not module.startswith("store/"):
            continue
        stem = Path(module).stem
        own = _queries_of_file(stem) if (QUERY_FILES / f"{stem}.sql").exists() else set()
        if names - own:
            strays.append(f"{module}: {sorted(names - own)}")
    assert not strays, "move the query into the module's own file, or call its module"


def test_each_query_file_belongs_to_its_store_module() -> None:
    files = {p.stem for p in QUERY_FILES.glob("*.sql")}
    orphans = {f for f in files if not (STORE / f"{f}.py").exists()}
    assert not orphans, "a query file is named after the store module that runs it"


def test_trigger_kept_tables_are_written_by_triggers_alone() -> None:
    functions = _function_targets()
    triggers = re.findall(
        r"CREATE TRIGGER \w+ AFTER \w+ ON (\w+).*?EXECUTE FUNCTION (\w+)\(", _schema(), re.S
    )
    for table, sources in TRIGGER_KEPT.items():
        assert table not in set().union(*_writes().values()), f"a query writes {table}"
        kept_from = {on for on, fn in triggers if table in _writes_through(functions, fn)}
        assert kept_from == sources


def _writes_through(functions: dict[str, dict[str, set[str]]], name: str) -> set[str]:
    # A trigger function that calls a writing function (job_counts_add) writes its tables.
    body = dict(re.findall(r"CREATE FUNCTION (\w+)\(.*?\$\$(.*?)\$\$", _schema(), re.S))
    found = set().union(*functions.get(name, {}).values())
    for other in functions:
        if other != name and re.search(rf"\b{other}\(", body.get(name, "")):
            found |= set().union(*functions[other].values())
    return found
