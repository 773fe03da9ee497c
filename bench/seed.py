"""Intents for the scenarios: created the way an application creates them.

Seeding goes through `Tidings.notify`, never through raw SQL, so every
measured dispatch starts from rows the real intake wrote. A seeded database
is kept as a template and cloned for each repetition.
"""

from __future__ import annotations

import itertools
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg

from bench.context import Context
from bench.db import MIGRATED
from tidings import Tidings
from tidings.platform.settings import Settings
from tidings.policies import builtin_document

SECRET = "bench-secret-key-0123456789abcdef"
TEMPLATE = "bench_offer"
BODY = "A spot opened in {{ class_name }}. Reply by {{ deadline }} to claim it."
SEED_THREADS = 2
WARM_INTENTS = 500


def engine(dsn: str, pool_size: int = 4) -> Tidings:
    return Tidings(dsn, secret_key=SECRET, settings=Settings(pool_size=pool_size))


def publish(t: Tidings) -> None:
    # Nothing is sent under deny by default without a published policy: the
    # shipped example, as a user starting out publishes it.
    t.publish_policy(builtin_document("default"))
    t.publish_template(
        TEMPLATE, channel="sms", body=BODY, required_variables=["class_name", "deadline"]
    )


def intent_body(tag: str, i: int) -> dict[str, Any]:
    """One intent as JSON would carry it (no deadline)."""
    # Distinct members and numbers, none ending in a simulator magic suffix
    # (....0000-....0500): every send is a plain acceptance.
    return {
        "idempotency_key": f"bench:{tag}:{i}",
        "channel": "sms",
        "recipient": {"ref": f"member-{i}", "phone": f"+1415555{1000 + i % 9000:04d}"},
        "template": TEMPLATE,
        "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
        "purpose": "transactional",
        "event_class": "waitlist_offer",
    }


def request(t: Tidings, tag: str, i: int) -> dict[str, Any]:
    return {**intent_body(tag, i), "expires_at": t.clock.now() + timedelta(hours=6)}


def notify_many(t: Tidings, tag: str, count: int, threads: int = SEED_THREADS) -> None:
    """`count` intents, one per transaction, from a few threads."""
    numbers = itertools.count()
    lock = threading.Lock()

    def produce() -> None:
        while True:
            with lock:
                i = next(numbers)
            if i >= count:
                return
            t.notify(**request(t, tag, i))

    workers = [threading.Thread(target=produce) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def settled(t: Tidings, dsn: str) -> None:
    """A fresh database as every install is a minute in: with statistics.

    Until autovacuum first analyzes a table (within a minute of the first
    rows), PostgreSQL plans a lookup of one intent by (tenant, id) with
    nothing to tell its indexes apart, and may pick one that holds every
    intent of the tenant; a plan cached then scans more with each create.
    The creation scenarios measure a running system, so they first create
    `WARM_INTENTS` and analyze, as autovacuum would.
    """
    notify_many(t, "warm", WARM_INTENTS)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")


def published_template(ctx: Context) -> str:
    """A migrated database with the bench template published (no intents)."""
    return seeded_template(ctx, 0)


def seeded_template(ctx: Context, count: int) -> str:
    """A template database holding `count` due intents; built once per run."""
    name = f"bench_seed_{count}"
    if name in ctx.templates:
        return name
    started = time.perf_counter()
    dsn = ctx.server.create(name, MIGRATED)
    with engine(dsn, pool_size=SEED_THREADS + 1) as t:
        publish(t)
        notify_many(t, "seed", count)
    ctx.templates[name] = dsn
    if count:
        print(f"  seeded {count} intents in {time.perf_counter() - started:.0f} s")
    return name
