"""One module per resource, each with an `APIRouter` named `router`.

To add a resource: write `routes/<resource>.py` and list its router in
`ROUTERS`; the app mounts them in this order.
"""

from __future__ import annotations

from fastapi import APIRouter

from tidings.api.routes import controls, events, health, intents, policies, templates, webhooks

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    intents.router,
    templates.router,
    policies.router,
    controls.router,
    webhooks.router,
    events.router,
)
