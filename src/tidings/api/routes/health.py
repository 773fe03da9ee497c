"""Liveness that means something: the database answers."""

from __future__ import annotations

from typing import Annotated

import psycopg
from fastapi import APIRouter, Depends

from tidings.api.auth import engine
from tidings.api.openapi import responses
from tidings.api.problems import Unavailable
from tidings.api.schemas.events import Health
from tidings.client import Tidings

router = APIRouter(tags=["health"])

# A health probe must answer quickly; waiting the pool's full timeout for a
# connection would make the prober give up first and learn nothing.
PROBE_TIMEOUT_S = 2.0


@router.get(
    "/healthz", responses=responses(503, auth=False), summary="200 when the database answers"
)
def healthz(root: Annotated[Tidings, Depends(engine)]) -> Health:
    try:
        root.ping(PROBE_TIMEOUT_S)
    except psycopg.Error as exc:  # the pool's timeout and closed errors are psycopg errors too
        raise Unavailable(f"the database is not reachable ({type(exc).__name__})") from None
    return Health(status="ok")
