"""One module per resource, each with an `APIRouter` named `router`.

To add a resource: write `routes/<resource>.py`, its models in
`api/schemas/<resource>.py`, and list its router in `ROUTERS`; the app
mounts them in this order.

One way to write a handler: a plain `def` taking its validated body, its
path and query values and a `Caller` (`Sender`, `Reader`, `Admin`), that
calls the facade (`caller.tidings`, never anything below it:
tests/unit/test_api_facade.py) and returns a schema model. FastAPI runs it
in its thread pool. `async def` only where no thread may be held while
waiting, with the reason beside it: the streamed upload (audiences), the
event webhook's DNS check (events) and the one-hop create (intents).
"""

from __future__ import annotations

from fastapi import APIRouter

from tidings.api.routes import (
    audiences,
    contacts,
    controls,
    events,
    health,
    inbound,
    intents,
    jobs,
    keys,
    policies,
    suppressions,
    templates,
    webhooks,
)

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    intents.router,
    jobs.router,
    audiences.router,
    contacts.router,
    suppressions.router,
    templates.router,
    policies.router,
    controls.router,
    webhooks.router,
    inbound.router,
    events.router,
    keys.router,
)
