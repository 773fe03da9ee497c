"""Scenario 7: a month of evidence purged while two workers dispatch.

A database holds one old month of evidence (2,000,000 rows quick, 10,000,000
with --full: per intent four transitions, an attempt, a receipt and an
event, all past the example policy's clocks) beside N fresh due intents.
Two worker processes dispatch the fresh ones through the in-process
simulator; after a steady window, retention runs in a process of its own,
and dispatch is measured again over a window of the same length:

- **drop**: `purge()`, which drops the month's partitions whole;
- **rows**: the same month's rows deleted row by row, 1,000 intents per
  transaction, with retention's own row-by-row statements: what every
  purge did before the evidence tables were partitioned (0026). It is
  watched for 30 s; the time the whole month would take is projected from
  its pace.

Each purge runs in a process started beforehand, so its start-up is not
measured. What the purge costs dispatch is reported as the intents not
dispatched while it ran, against the rate before it: (before - during) x
its duration.

Each variant runs on its own clone of the seeded database. Dispatch is
counted from the audit (bench/progress.py) every 0.1 s; the longest gap
without progress in each window shows a stall.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from datetime import UTC, datetime
from typing import Any

import psycopg

from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.procs import WorkerGroup, WorkerSpec
from bench.progress import dispatched, mark
from bench.seed import engine, notify_many, publish
from tidings.domain.evidence_months import TABLES, Month, months

TITLE = "7. A month of evidence purged under dispatch"
QUICK_ROWS, FULL_ROWS = 2_000_000, 10_000_000
ROWS_PER_INTENT = 7  # four transitions, an attempt, an observation, an event
MONTHS_BACK = 8  # past the example policy's clocks (observations 90, attempts 180 days)
WARM_UP_S = 2.0
ROWS_WATCH_S = 30.0
SAMPLE_S = 0.1
_spawn = mp.get_context("spawn")


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("purge", TITLE)
    rows = FULL_ROWS if ctx.config.full else QUICK_ROWS
    window = max(3.0, ctx.config.seconds)
    template, old = _seeded(ctx, rows)
    values = repeat(ctx.config.repetitions, lambda: _once(ctx, template, old, window))
    result.measures += [
        Measure("purge.before", "dispatch, 2 workers, before the purge", "intents/s",
                values["before"]),
        Measure("purge.drop_s", f"purge() dropping the month of {rows:,} rows, whole", "s",
                values["drop_s"]),
        Measure("purge.during_drop", "dispatch meanwhile", "intents/s", values["during_drop"],
                ("purge.before",)),
        Measure("purge.stall_drop_ms", "longest pause in dispatch meanwhile", "ms",
                values["stall_drop_ms"]),
        Measure("purge.lost_drop", "intents not dispatched for it (against before)", "intents",
                values["lost_drop"]),
        Measure("purge.rows_s", "the same month deleted row by row (projected from its pace)",
                "s", values["rows_s"]),
        Measure("purge.during_rows", "dispatch meanwhile", "intents/s", values["during_rows"],
                ("purge.before",)),
        Measure("purge.lost_rows", "intents not dispatched for it (against before)", "intents",
                values["lost_rows"], ("purge.lost_drop",)),
    ]  # fmt: skip
    result.notes.append(
        f"old month {old}: {rows // ROWS_PER_INTENT:,} intents, {rows:,} evidence rows; "
        f"the row-by-row purge is watched for {ROWS_WATCH_S:.0f} s and its whole time "
        "projected from its pace"
    )
    return result


def _seeded(ctx: Context, rows: int) -> tuple[str, Month]:
    """A template with the old month's evidence and N fresh due intents."""
    name = f"bench_purge_{rows}"
    old = Month.of(datetime.now(UTC)).plus(-MONTHS_BACK)
    if name in ctx.templates:
        return name, old
    started = time.perf_counter()
    dsn = ctx.server.create(name, "bench_migrated")
    _months_from(dsn, old)
    with engine(dsn, 3) as t:
        publish(t)
        notify_many(t, "purge", ctx.config.intents)
    with psycopg.connect(dsn, autocommit=True) as conn:
        (version,) = conn.execute("SELECT version FROM policies").fetchone()  # type: ignore[misc]
        conn.execute(_OLD_MONTH, {"n": rows // ROWS_PER_INTENT, "version": version,
                                   "start": old.starts_at, "end": old.ends_at})  # fmt: skip
        conn.execute("VACUUM ANALYZE")
    ctx.templates[name] = dsn
    print(f"  seeded {rows:,} evidence rows in {time.perf_counter() - started:.0f} s")
    return name, old


def _months_from(dsn: str, first: Month) -> None:
    """Months from `first` on: a deployment that has been running since then."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        made = [Month.of(r[0]) for r in conn.execute("SELECT month FROM evidence_months")]
        for month in made:
            for table in TABLES:
                conn.execute("SELECT evidence_month_drop(%s, %s, '{}')", (table, month.first_day))
        conn.execute("DELETE FROM evidence_months")
        for month in months(first, made[-1]):
            conn.execute(
                "SELECT evidence_month_create(%s, %s, %s, now())",
                (month.first_day, month.lower_id, month.upper_id),
            )


def _once(ctx: Context, template: str, old: Month, window: float) -> dict[str, float]:
    total = _old_rows(ctx, template, old)
    drop = _measured(ctx, template, old, window, "drop", None)
    rows = _measured(ctx, template, old, window, "rows", ROWS_WATCH_S)
    rows_s = rows["seconds"] * total / rows["work"] if rows["work"] else float("nan")
    return {
        "before": drop["before"],
        "drop_s": drop["seconds"],
        "during_drop": drop["during"],
        "stall_drop_ms": drop["stall_ms"],
        "lost_drop": max(0.0, drop["before"] - drop["during"]) * drop["seconds"],
        "rows_s": rows_s,
        "during_rows": rows["during"],
        "lost_rows": max(0.0, rows["before"] - rows["during"]) * rows_s,
    }


def _measured(
    ctx: Context, template: str, old: Month, window: float, how: str, watch: float | None
) -> dict[str, Any]:
    """Dispatch over a steady window, then while the purge runs: until it is
    done, or for `watch` seconds."""
    name, dsn = ctx.server.fresh("purge", template, big=True)
    ready, go, done = _spawn.Event(), _spawn.Event(), _spawn.Event()
    work = _spawn.Value("q", 0)
    purger = _spawn.Process(
        target=_purger_main, args=(dsn, old, how, ready, go, done, work), daemon=True
    )
    purger.start()
    try:
        spec = WorkerSpec(dsn)  # their own purge is off: only the measured one runs
        with WorkerGroup(spec, 2) as group, psycopg.connect(dsn, autocommit=True) as c:
            if not ready.wait(60):
                raise RuntimeError("the purge process did not start")
            group.go()
            time.sleep(WARM_UP_S)
            before, _ = _window(c, lambda elapsed: elapsed >= window)
            started = time.perf_counter()
            go.set()
            during, stall = _window(
                c, lambda elapsed: done.is_set() or (watch is not None and elapsed >= watch)
            )
            seconds = time.perf_counter() - started
        return {"before": before, "during": during, "stall_ms": stall * 1000,
                "seconds": seconds, "work": work.value}  # fmt: skip
    finally:
        purger.terminate()
        purger.join(10)
        ctx.server.drop(name)


def _window(conn: psycopg.Connection[Any], over: Any) -> tuple[float, float]:
    """Dispatch until `over(elapsed)`: (intents per second, the longest gap in s)."""
    since = mark(conn)
    started = last_change = time.perf_counter()
    seen, longest = 0, 0.0
    while not over((now := time.perf_counter()) - started):
        count = dispatched(conn, since)
        if count != seen:
            longest, seen, last_change = max(longest, now - last_change), count, now
        time.sleep(SAMPLE_S)
    return dispatched(conn, since) / (time.perf_counter() - started), longest


def _old_rows(ctx: Context, template: str, old: Month) -> int:
    with psycopg.connect(ctx.server.dsn(template)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM intents WHERE id >= %s AND id < %s",
            (old.lower_id, old.upper_id),
        ).fetchone()
    return int(row[0]) * ROWS_PER_INTENT if row else 0


def _purger_main(dsn: str, old: Month, how: str, ready: Any, go: Any, done: Any, work: Any) -> None:
    from tidings.store.database import Database

    db = Database(dsn, max_size=2)
    ready.set()
    go.wait()
    if how == "drop":
        _drop(db, work)
    else:
        _rows(db, old, work)
    db.close()
    done.set()


def _drop(db: Any, work: Any) -> None:
    from tidings.dispatch.retention import purge

    work.value = len(purge(db, datetime.now(UTC))["months_dropped"])


def _rows(db: Any, old: Month, work: Any) -> None:
    """Retention's row-by-row statements over the old month, until stopped:
    what every purge did before the evidence tables were partitioned."""
    from tidings.store.database import execute, fetch_one

    with db.transaction() as conn:
        version = conn.execute("SELECT version FROM policies LIMIT 1").fetchone()["version"]
    now = datetime.now(UTC)
    group = {"tenant_id": "default", "policy_version": version, "now": now, "limit": 1000,
             "before": now, "low": old.lower_id, "high": old.upper_id}  # fmt: skip
    while True:
        with db.transaction() as conn:
            gone = execute(conn, "purge_observations_of", group)
        work.value += gone
        if gone < 1000:
            break
    while True:
        with db.transaction() as conn:
            row = fetch_one(conn, "purge_attempt_evidence", group)
        assert row is not None
        work.value += int(row["attempts"]) * (ROWS_PER_INTENT - 1)  # and transitions, events
        if int(row["intents"]) < 1000:
            break


# One old month of evidence, written the way the engine writes it (ids
# from each intent's creation time, rows in the month's partitions), but
# in bulk: delivered intents, each with its creation and acceptance audit,
# its attempt, a delivery receipt and an application event.
_OLD_MONTH = """
WITH made AS (
    INSERT INTO intents (tenant_id, id, idempotency_key, request_hash, channel, state,
                         recipient_ref, template_name, template_revision, purpose, event_class,
                         policy_version, version, attempt_count, created_by, created_at,
                         accepted_at, last_status_at, terminal_at, updated_at)
    SELECT 'default',
           (lpad(to_hex(ms), 12, '0') || '7' || substr(md5(i::text), 1, 3) || '8'
            || substr(md5(i::text), 4, 15))::uuid,
           'old:' || i, 'x', 'sms', 'delivered', 'member-' || mod(i, 9000), 'bench_offer', 1,
           'transactional', 'waitlist_offer', %(version)s, 4, 1, 'bench', at, at, at,
           at + interval '1 second', at + interval '1 second'
    FROM generate_series(1, %(n)s) AS i,
         LATERAL (SELECT %(start)s::timestamptz
                         + (%(end)s::timestamptz - %(start)s::timestamptz) * (i - 1) / %(n)s
                         AS at) AS t,
         LATERAL (SELECT (extract(epoch FROM at) * 1000)::bigint AS ms) AS m
    RETURNING tenant_id, id, created_at, idempotency_key
), audit AS (
    INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event, actor,
                             input, policy_version, at)
    SELECT tenant_id, id, v, f, s, e, 'worker', '{"attempt": 1}', %(version)s, created_at
    FROM made, (VALUES (1, NULL, 'pending', 'create'), (2, 'pending', 'sending', 'claim'),
                       (3, 'sending', 'accepted', 'provider_accepted'),
                       (4, 'accepted', 'delivered', 'delivered')) AS steps (v, f, s, e)
), tried AS (
    INSERT INTO attempts (tenant_id, intent_id, n, attempt_key, channel, state, provider,
                          provider_message_id, created_at, accepted_at, last_status_at,
                          terminal_at, call_started_at)
    SELECT tenant_id, id, 1, 'tdg:' || id || ':1', 'sms', 'delivered', 'simulator',
           'SM-' || id, created_at, created_at, created_at, created_at, created_at
    FROM made
), told AS (
    INSERT INTO observations (tenant_id, provider, dedupe_key, intent_id, attempt_n,
                              provider_message_id, status, raw_status, source, occurred_at,
                              received_at, effect)
    SELECT tenant_id, 'simulator', 'old:' || id, id, 1, 'SM-' || id, 'delivered', 'delivered',
           'webhook', created_at, created_at, 'intent_delivered'
    FROM made
)
INSERT INTO events (tenant_id, type, intent_id, payload, created_at)
SELECT tenant_id, 'intent.delivered', id,
       jsonb_build_object('intent_id', id, 'idempotency_key', idempotency_key), created_at
FROM made
"""
