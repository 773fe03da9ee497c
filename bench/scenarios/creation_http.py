"""Scenario 3 over HTTP: `POST /v1/intents`, to tidings and to its peer.

- `tidings serve` (loopback), from 1 and from 8 client threads, each with
  its own keep-alive connection, and from 8 to `tidings serve --workers 2`.
- The peer (bench/http_peer.py): the thinnest app doing the create's SQL,
  under the same uvicorn options, from the same 8 client threads
  (`http.peer_c8`, the baseline of `create.http_c8`).

Every case pins the client threads to one core and the server to the other
(bench/pinning.py); the report says so, or says why not. Each repetition
starts on a fresh database with statistics (`seed.settled`).
"""

from __future__ import annotations

import threading
import time
from functools import partial

from bench import api_client, http_peer, pinning
from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.pinning import CLIENT, SERVER, pinned
from bench.procs import serve_command, serving
from bench.same_sql import capture_create
from bench.seed import engine, intent_body, settled

# (clients, API processes): `tidings serve` as users run it, 1 and 2 processes.
HTTP_CASES = ((1, 1), (8, 1), (8, 2))
PEER_CLIENTS = 8


def measure(ctx: Context, template: str, result: ScenarioResult) -> None:
    reason = api_client.unavailable()
    if reason:
        result.notes.append(f"HTTP POST /v1/intents: {reason}")
        return
    result.notes.append(pinning.note())
    for clients, processes in HTTP_CASES:
        values = repeat(ctx.config.repetitions, partial(_once, ctx, template, clients, processes))
        key = f"create.http_c{clients}" + (f"_p{processes}" if processes > 1 else "")
        label = f"POST /v1/intents, {clients} client(s), tidings serve --workers {processes}"
        compare = ("http.peer_c8", "create.notify") if key == "create.http_c8" else ()
        result.measures.append(
            Measure(key, label, "intents/s", values["rate"], compare or ("create.notify",))
        )
        _errors(result, f"{clients} client(s)", values)
    values = repeat(ctx.config.repetitions, partial(_peer_once, ctx, template))
    label = f"peer: thinnest app doing the create's SQL, {PEER_CLIENTS} clients"
    result.measures.append(Measure("http.peer_c8", label, "intents/s", values["rate"]))
    _errors(result, "peer", values)


def _errors(result: ScenarioResult, who: str, values: dict[str, list[float]]) -> None:
    if sum(values["errors"]):
        result.notes.append(f"{who}: {sum(values['errors']):.0f} non-201 answers")


def _once(ctx: Context, template: str, clients: int, processes: int) -> dict[str, float]:
    name, dsn = ctx.server.fresh("http", template)
    key = api_client.create_key(dsn)
    try:
        with engine(dsn, 2) as t:
            settled(t, dsn)
        pool = clients + 4
        with serve_command(dsn, processes, pool_size=pool, pin=SERVER) as base_url:
            return drive(ctx, base_url, key, clients, "http")
    finally:
        ctx.server.drop(name)


def _peer_once(ctx: Context, template: str) -> dict[str, float]:
    name, dsn = ctx.server.fresh("http_peer", template)
    try:
        with engine(dsn, 2) as t:
            settled(t, dsn)
        statements = capture_create(dsn)  # the statement sql.create replays, on this database
        pool = PEER_CLIENTS + 4
        with serving(http_peer.main, dsn, pool, statements, pin=SERVER) as (base_url, _):
            return drive(ctx, base_url, "peer-ignores-it", PEER_CLIENTS, "peer")
    finally:
        ctx.server.drop(name)


def drive(ctx: Context, base_url: str, key: str, clients: int, tag: str) -> dict[str, float]:
    """`clients` threads, pinned to the client core, each POSTing its share of
    the run's intents on one keep-alive connection until the time cap."""
    counts = {"done": 0, "errors": 0}
    lock = threading.Lock()
    with pinned(CLIENT):
        started = time.perf_counter()
        deadline = started + ctx.config.seconds

        def post(worker: int) -> None:
            with api_client.client(base_url, key) as http:
                for i in range(worker, ctx.config.intents, clients):
                    if time.perf_counter() >= deadline:
                        return
                    reply = http.post("/v1/intents", json=intent_body(tag, i))
                    with lock:
                        counts["done" if reply.status_code == 201 else "errors"] += 1

        threads = [threading.Thread(target=post, args=(w,)) for w in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    return {"rate": counts["done"] / elapsed, "errors": counts["errors"]}
