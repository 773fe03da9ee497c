"""Baseline: the thinnest HTTP app doing the create's SQL (`http.peer_c8`).

The peer of `POST /v1/intents` (issue 42) answers the same request body
with the create's own statement and nothing else, the way a hand-written
endpoint over the same database would:

- a Starlette app with one route, `POST /v1/intents`: it reads the JSON
  body, takes its `idempotency_key`, and on a worker thread (as tidings'
  synchronous handlers run) replays the statement one `notify` issues
  (captured by bench/same_sql.py, as for `sql.create`) with a fresh
  time-ordered id and that key, on a connection of tidings' own pool
  (`Database`, the same psycopg_pool settings, sized as `tidings serve` is
  with TIDINGS_POOL_SIZE) in autocommit, as the engine creates; it answers
  201 with the intent's id, state and version;
- no authentication, validation, policy, template, phone parsing or
  encryption: those are the engine logic the ratio prices;
- under uvicorn with the options `tidings serve` gives it (api/serve.py:
  `log_level="info"`, `proxy_headers=True`, `log_config=None`, the access
  log on, loop and HTTP parser left to uvicorn's "auto", which picks uvloop
  and httptools when installed, one process), in a spawned interpreter of
  its own, pinned as tidings' is. tidings writes each access line through
  its redacting handler; the peer installs no handler, so its access
  records are made and dropped: the line written is tidings' cost.

The client is the one that measures `create.http_c8` (same threads, same
keep-alive connections, same bodies, same Authorization header, ignored
here).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from bench.same_sql import Captured

RESPONSE_STATE = "pending"


def app(dsn: str, pool_size: int, statements: Captured) -> Any:
    from psycopg.types.json import Jsonb
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tidings.domain.ids import uuid7
    from tidings.store.database import Database, fetch_one

    ((name, captured),) = statements
    create = {k: Jsonb(v) if isinstance(v, dict) else v for k, v in captured.items()}
    db = Database(dsn, max_size=pool_size)

    def insert(key: str) -> dict[str, Any]:
        with db.statements() as conn:
            row = fetch_one(conn, name, {**create, "id": uuid7(datetime.now(UTC)),
                                         "idempotency_key": key})  # fmt: skip
        if row is None or row["id"] is None:
            raise RuntimeError("the peer's create inserted nothing")
        return row

    async def post(request: Request) -> JSONResponse:
        body = await request.json()
        row = await run_in_threadpool(insert, str(body["idempotency_key"]))
        answer = {"id": str(row["id"]), "state": RESPONSE_STATE, "version": 1}
        return JSONResponse(answer, status_code=201)

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        db.close()

    routes = [Route("/v1/intents", post, methods=["POST"]), Route("/healthz", healthz)]
    return Starlette(routes=routes, lifespan=lifespan)


def main(port: int, dsn: str, pool_size: int, statements: Captured) -> None:
    """The peer's process: uvicorn as `tidings serve` configures it."""
    import uvicorn

    # api/serve.py's Config: `tidings serve` passes no level of its own to
    # uvicorn (its --log-level sets tidings' handler), so uvicorn's access
    # logger is at info there too; here no handler takes its records.
    config = uvicorn.Config(
        app(dsn, pool_size, statements),
        host="127.0.0.1",
        port=port,
        log_level="info",
        proxy_headers=True,
        log_config=None,
    )
    uvicorn.Server(config).run()
