"""One module per resource, each with an `APIRouter` named `router`.

To add a resource: write `routes/<resource>.py` and list its router in
`ROUTERS`; the app mounts them in this order.
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
    templates,
    webhooks,
)

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    intents.router,
    jobs.router,
    audiences.router,
    contacts.router,
    templates.router,
    policies.router,
    controls.router,
    webhooks.router,
    inbound.router,
    events.router,
    keys.router,
)
