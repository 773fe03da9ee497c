"""What each piece of the schema costs dispatch's own SQL, measured by taking
it away: `python -m bench.ab_schema [--rounds 4] [--intents 20000] [--only NAME]`.

Scenario 1's database is seeded and dispatch's statements captured from a
real worker once (bench/same_sql_dispatch.py). Then, round after round, each
variant (the unmodified schema, and the schema with one suspect removed) is
cloned from the seeded template, changed, and replayed by the same-SQL
replay (bench/same_sql_replay.py, 2 processes), in an order that rotates
each round, so every variant sees the machine's load as the others do.

Reported per variant: the median intents/s, and counts that do not depend
on the machine's load, per accepted intent: WAL bytes (pg_current_wal_lsn
before and after, on this run's own embedded server), buffers touched
(pg_stat_database blks_hit + blks_read) and commits. Asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from importlib import resources
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.context import Context, RunConfig
from bench.db import Server
from bench.progress import states
from bench.same_sql_dispatch import capture_dispatch, summary
from bench.same_sql_replay import PROCESSES, _replayer
from bench.seed import seeded_template
from bench.spawned import Link, Spawned

# The mark as it was at 6923304: no pause lookups (provider_pauses, provider_backoffs).
MARK_WITHOUT_PAUSES = """
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb)
         AS t (tenant_id text, intent_id uuid, n int, version int,
               opted_out boolean, suppressed boolean)
    LIMIT %(count)s
), checked AS (
    SELECT t.tenant_id, t.intent_id, t.n,
           (i.state = 'sending' AND i.version = t.version
            AND i.lease_owner = %(owner)s) AS held,
           EXISTS (
               SELECT 1 FROM controls c
               WHERE c.tenant_id = i.tenant_id AND c.kind = 'kill_switch' AND c.enabled
                 AND c.channel IN ('', i.channel) AND c.country IN ('', coalesce(i.country, ''))
                 AND c.purpose IN ('', i.purpose) AND c.event_class IN ('', i.event_class)
           ) AS killed,
           (NOT t.opted_out AND EXISTS (
               SELECT 1 FROM opt_outs o
               WHERE o.tenant_id = i.tenant_id AND o.channel = i.channel
                 AND o.destination_hash = i.destination_hash))
           OR (NOT t.suppressed AND EXISTS (
               SELECT 1 FROM suppressions s
               WHERE s.tenant_id = i.tenant_id AND s.channel = i.channel
                 AND s.destination_hash = i.destination_hash)) AS stopped,
           NULL::timestamptz AS paused_until
    FROM input t JOIN intents i ON i.tenant_id = t.tenant_id AND i.id = t.intent_id
), marked AS (
    UPDATE attempts a SET call_started_at = %(now)s
    FROM checked c
    WHERE a.tenant_id = c.tenant_id AND a.intent_id = c.intent_id AND a.n = c.n
      AND c.held AND NOT c.killed AND NOT c.stopped
      AND a.state = 'sending' AND a.call_started_at IS NULL
    RETURNING a.tenant_id, a.intent_id, a.n
)
SELECT c.tenant_id, c.intent_id, c.n, c.held, c.killed, c.stopped, c.paused_until,
       m.n IS NOT NULL AS marked
FROM checked c
LEFT JOIN marked m ON m.tenant_id = c.tenant_id AND m.intent_id = c.intent_id AND m.n = c.n
"""


def _mark_before_0048() -> str:
    """The mark as it was before 0048: prepared, so its plan was the plan
    cache's choice, generic from the sixth execution in most runs."""
    from tidings.store.queries import PLAN_EACH_TIME, q

    text = q("attempts_call_started")
    assert PLAN_EACH_TIME in text
    return text.replace(PLAN_EACH_TIME, "-- (prepared)", 1)


JOB_COUNTS_TRIGGERS = (
    ("job_counts_intents_inserted", "intents"),
    ("job_counts_intents_updated", "intents"),
    ("job_counts_attempts_inserted", "attempts"),
    ("job_counts_attempts_updated", "attempts"),
    ("job_counts_attempts_deleted", "attempts"),
    ("job_counts_transitions_inserted", "transitions"),
    ("job_counts_observations_inserted", "observations"),
    ("job_counts_recipients_inserted", "job_recipients"),
)


def _drop_indexes(*names: str) -> list[str]:
    return [f"DROP INDEX IF EXISTS {n}" for n in names]


INDEXES_0031 = ("intents_open_oldest", "intents_expired_unsent", "intents_retention_groups")
INDEXES_0034 = ("intents_listing", "intents_listing_recipient", "intents_listing_event_class",
                "intents_listing_state", "intents_listing_correlation")  # fmt: skip
INDEXES_0035 = ("suppressions_id", "suppressions_listing", "suppressions_listing_reason",
                "suppressions_listing_provider", "suppressions_destination")  # fmt: skip
INDEXES_0038 = ("transitions_audit_cursor", "transitions_unaudited")


def _main_job_counts() -> list[str]:
    """The job_counts functions as 0033 wrote them (stripe pg_backend_pid() % 32,
    no early exits): the schema before 0045."""
    text = (
        resources.files("tidings.store") / "sql" / "migrations" / "0033_job_counts.sql"
    ).read_text()
    found = re.findall(r"CREATE FUNCTION .*?\$\$;", text, re.S)
    return [f.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1) for f in found]


def _transition_without_claimed_at() -> str:
    """transition_many as it was before 0047: no claimed_at written."""
    from tidings.store.queries import all_queries

    sql = all_queries()["transition_many"]
    line = re.search(r"\n\s*claimed_at = CASE[^\n]*,", sql)
    if line is None:
        raise RuntimeError("transition_many no longer writes claimed_at as 0047 does")
    return re.sub(r"\n\s*-- A claim: its attempt[^\n]*\n\s*-- \(0047[^\n]*", "",
                  sql.replace(line.group(0), ""))  # fmt: skip


# 0047: intents_unreconciled keyed by tenant and claim time, and the claim's
# time written; before it, the same partial index without the tenant.
BEFORE_0047 = [
    "DROP INDEX intents_unreconciled",
    "CREATE INDEX intents_unreconciled ON intents (event_class, channel, created_at)"
    " WHERE state IN ('sending', 'accepted', 'reconciling')",
]


def _index_from(migration: str, name: str) -> str:
    """The CREATE INDEX statement of index `name`, as `migration` wrote it."""
    text = (resources.files("tidings.store") / "sql" / "migrations" / migration).read_text()
    found = re.search(rf"CREATE INDEX {name} ON .*?;", text, re.S)
    assert found is not None, (migration, name)
    return found.group(0)


# The intents indexes 0048 merged into 0034's listing indexes, as their
# migrations made them: put back, they give the schema before 0048.
BEFORE_0048 = [
    _index_from("0004_contacts.sql", "intents_recipient"),
    _index_from("0029_key_lineage_cancel_indexes.sql", "intents_event_class"),
    _index_from("0029_key_lineage_cancel_indexes.sql", "intents_correlation"),
    _index_from("0031_read_indexes.sql", "intents_open_oldest"),
]

INTENT_COUNTS_TRIGGERS = (
    "intent_counts_inserted",
    "intent_counts_updated",
    "intent_counts_deleted",
)

# name -> (statements run on the clone, query overrides in the replayers)
VARIANTS: dict[str, tuple[list[str], dict[str, str]]] = {
    "unmodified": ([], {}),
    "job_counts as before 0045": (_main_job_counts(), {}),
    "-job_counts triggers (0033)": (
        [f"DROP TRIGGER {t} ON {table}" for t, table in JOB_COUNTS_TRIGGERS],
        {},
    ),
    "-intent_counts triggers (0043)": (
        [f"DROP TRIGGER {t} ON intents" for t in INTENT_COUNTS_TRIGGERS],
        {},
    ),
    "-mark's pause lookups": ([], {"attempts_call_started": MARK_WITHOUT_PAUSES}),
    "-intents indexes (0031)": (_drop_indexes(*INDEXES_0031), {}),
    "-intents listing indexes (0034)": (_drop_indexes(*INDEXES_0034), {}),
    "-transitions txid indexes (0038)": (_drop_indexes(*INDEXES_0038), {}),
    "-attempts_refused (0039)": (_drop_indexes("attempts_refused"), {}),
    "as before 0047 (unreconciled index)": (
        BEFORE_0047,
        {"transition_many": _transition_without_claimed_at()},
    ),
}
# Not on dispatch's path (no statement of the trace writes or reads them):
# the suppressions indexes (0035) and observations_reconciled (0037); the
# first run (bench/results/2026-12-04-ab-schema-run1-unanalyzed.txt) saw no
# difference in work for either.


def _all_removed() -> tuple[list[str], dict[str, str]]:
    statements: list[str] = []
    overrides: dict[str, str] = {}
    for name, (sql, over) in VARIANTS.items():
        if name not in (
            "unmodified",
            "job_counts as before 0045",
            "as before 0047 (unreconciled index)",
        ):
            statements += sql
            overrides.update(over)
    return statements, overrides


VARIANTS["-all of the above"] = _all_removed()
VARIANTS["as main before issue 42's fixes"] = (_main_job_counts(), {})
VARIANTS["as before 0048"] = (BEFORE_0048, {"attempts_call_started": _mark_before_0048()})
VARIANTS["mark as before 0048"] = ([], {"attempts_call_started": _mark_before_0048()})


def _replay(dsn: str, trace: Any, index: int, seconds: float, overrides: dict[str, str],
            link: Link) -> None:  # fmt: skip
    from tidings.store import queries

    queries.all_queries().update(overrides)
    queries.planned_each_time.cache_clear()  # an override may plan otherwise
    _replayer(dsn, trace, index, seconds, link)


def _counters(conn: psycopg.Connection[Any], db: str) -> tuple[int, int, int]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, blks_hit + blks_read, xact_commit"
        " FROM pg_stat_database WHERE datname = %s",
        (db,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def _single_pass(dsn: str, trace: Any, overrides: dict[str, str]) -> tuple[int, dict[str, float]]:
    """The whole trace once, by one connection: (intents accepted, seconds per query name)."""
    from bench import same_sql_replay as replay
    from tidings.store import database, queries

    spent: dict[str, float] = {}
    real = {h: getattr(database, h) for h in ("fetch_one", "fetch_all", "execute")}

    def timed(helper: str) -> Any:
        def call(conn: Any, name: str, params: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return real[helper](conn, name, params)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0

        return call

    saved = dict(queries.all_queries())
    queries.all_queries().update(overrides)
    queries.planned_each_time.cache_clear()  # an override may plan otherwise
    try:
        for h in real:
            setattr(database, h, timed(h))
        with psycopg.connect(dsn, row_factory=dict_row, autocommit=False) as conn:
            swap = replay._Swap(trace.provider_ids, "single", replay._changing(trace))
            moved, _ = replay._pass(conn, trace, swap, time.monotonic() + 600)
            # How the mark was planned: a custom plan is a planning at each
            # execution, and planning reads buffers too (empty indexes'
            # metapages, never cached), which the counts above include.
            plans = conn.execute(
                "SELECT coalesce(sum(generic_plans), 0) AS g, coalesce(sum(custom_plans), 0) AS c"
                " FROM pg_prepared_statements WHERE statement LIKE %s",
                ("%SET call_started_at%",),
            ).fetchone()
            assert plans is not None
            spent["plans:generic"], spent["plans:custom"] = plans["g"], plans["c"]
            conn.rollback()
    finally:
        for h, f in real.items():
            setattr(database, h, f)
        queries.all_queries().clear()
        queries.all_queries().update(saved)
        queries.planned_each_time.cache_clear()
    return moved, spent


def once(ctx: Context, template: str, trace: Any, variant: str) -> dict[str, float]:
    statements, overrides = VARIANTS[variant]
    name, dsn = ctx.server.fresh("ab_schema", template)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)
            # Autovacuum would run (and write WAL) in some variants' window, not others'.
            for (table,) in conn.execute(
                "SELECT c.oid::regclass::text FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'public' AND c.relkind = 'r'"
            ).fetchall():
                conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            # As autovacuum would have within a minute of the seed: with
            # statistics, so no variant's plans are a never-analyzed table's.
            conn.execute("ANALYZE")
            conn.execute("CHECKPOINT")
            # This connection's own statistics (the ALTERs above) flushed now,
            # not into the measured window.
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT 1")
            # Work, load-independent: the whole trace once, by one connection.
            before = _counters(conn, name)
            single, spent = _single_pass(dsn, trace, overrides)
            time.sleep(0.6)
            after = _counters(conn, name)
            wal, blocks, commits = (a - b for a, b in zip(after, before, strict=True))
            # Throughput: 2 processes, from where the single pass left the queue.
            args = [(dsn, trace, i, ctx.config.seconds, overrides) for i in range(PROCESSES)]
            with Spawned(_replay, args) as group:
                started = group.go()
                results = group.results(ctx.config.seconds + 60)
            done = sum(moved for moved, _ in results)
            elapsed = max(end for _, end in results) - started
        accepted = states(dsn).get("accepted", 0)
        if accepted != done + single:
            raise RuntimeError(f"the replay counted {done + single} moves but left {accepted}")
        out = {"rate": done / elapsed, "wal": wal / single, "blocks": blocks / single,
               "commits": commits / single}  # fmt: skip
        out.update({f"ms:{k}": 1000 * v / single for k, v in spent.items() if ":" not in k})
        out.update({k: v for k, v in spent.items() if k.startswith("plans:")})
        return out
    finally:
        ctx.server.drop(name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab_schema", description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--intents", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--only", action="append", help="variant names (default: all)")
    args = parser.parse_args(argv)
    names = [n for n in VARIANTS if not args.only or n == "unmodified" or n in args.only]
    server = Server()
    ctx = Context(RunConfig(seconds=args.seconds, intents=args.intents), server)
    try:
        template = seeded_template(ctx, args.intents)
        trace = capture_dispatch(ctx, template)
        print(summary(trace), flush=True)
        found: dict[str, list[dict[str, float]]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                found[n].append(once(ctx, template, trace, n))
                v = found[n][-1]
                line = f"round {r} {n:36s} {v['rate']:7.0f}/s  wal {v['wal']:7.0f} B"
                line += f"  blocks {v['blocks']:6.1f}  commits {v['commits']:.3f}"
                g, c = v["plans:generic"], v["plans:custom"]
                marks = f"mark plans {g:.0f} generic {c:.0f} custom"
                print(f"{line}  {marks}", flush=True)
    finally:
        server.close()
    base = {k: statistics.median(v[k] for v in found["unmodified"]) for k in found["unmodified"][0]}
    print("\n| variant | intents/s (median) | vs unmodified | WAL B/intent | buffers/intent |"
          " commits/intent |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for n in names:
        m = {
            k: statistics.median(v[k] for v in found[n])
            for k in ("rate", "wal", "blocks", "commits")
        }
        print(
            f"| {n} | {m['rate']:,.0f} | {m['rate'] / base['rate']:.2f}x |"
            f" {m['wal']:,.0f} ({m['wal'] - base['wal']:+,.0f}) |"
            f" {m['blocks']:.1f} ({m['blocks'] - base['blocks']:+.1f}) | {m['commits']:.3f} |"
        )
    print("\nms per intent by statement, single connection (medians):")
    keys = sorted(k for k in base if k.startswith("ms:"))
    print("| variant | " + " | ".join(k[3:] for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for n in names:
        m = {k: statistics.median(v.get(k, 0.0) for v in found[n]) for k in keys}
        print(f"| {n} | " + " | ".join(f"{m[k]:.3f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
