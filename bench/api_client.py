"""Talking to the API process: keys, intents and bulk jobs, over loopback.

Bulk jobs are driven through the public HTTP contract (`POST /v1/jobs`,
`GET /v1/jobs/{id}`, `POST /v1/audiences`) rather than a library call, so
the benchmark does not depend on how `tidings.jobs` arranges its internals.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from bench.seed import TEMPLATE, engine

# A 1M-recipient audience takes minutes to stream and freeze.
JOB_TIMEOUT_S = 600.0


def unavailable(feature: str = "intents") -> str | None:
    """Why the API (or its jobs routes) cannot be benchmarked, or None."""
    try:
        from tidings.api.app import create_app  # noqa: F401
        from tidings.api.routes import ROUTERS
        from tidings.store import api_keys  # noqa: F401
    except ImportError as exc:
        return f"skipped: API unavailable ({exc.name})"
    routes = {(getattr(r, "path", ""), m) for router in ROUTERS for r in router.routes
              for m in getattr(r, "methods", ())}  # fmt: skip
    for path in {"jobs": ["/v1/jobs"], "uploads": ["/v1/jobs", "/v1/audiences"]}.get(feature, []):
        if (path, "POST") not in routes:
            return f"skipped: {feature} unavailable (no POST {path} in the API)"
    return None


def create_key(dsn: str) -> str:
    """An API key for the bench tenant with every scope; returns the plaintext."""
    from tidings.store import api_keys

    with engine(dsn, 1) as t, t.db.transaction() as conn:
        _, plaintext = api_keys.create_key(
            conn, t.tenant, ["send", "read", "admin"], "bench", vault=t.vault
        )
    return plaintext


def client(base_url: str, key: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.Client(base_url=base_url, headers=headers, timeout=30.0)


def member(i: int) -> dict[str, Any]:
    return {"ref": f"member-{i}", "phone": f"+1415555{1000 + i % 9000:04d}"}


def job_body(tag: str, recipients: int | None = None, **audience: Any) -> dict[str, Any]:
    """A job for `recipients` inline members, or for `audience_upload=<id>`."""
    if recipients is not None:
        audience["audience"] = [member(i) for i in range(recipients)]
    return {
        "idempotency_key": f"bench:job:{tag}",
        "event_class": "waitlist_offer",
        "purpose": "transactional",
        "template": {"name": TEMPLATE},
        "channels": ["sms"],
        "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
        **audience,
    }


def submit_job(http: httpx.Client, tag: str, recipients: int) -> str:
    reply = http.post("/v1/jobs", json=job_body(tag, recipients), timeout=JOB_TIMEOUT_S)
    reply.raise_for_status()
    return str(reply.json()["id"])


def ndjson_body(recipients: int, lines_per_chunk: int = 1000) -> Iterator[bytes]:
    """The audience as a generator: neither side ever holds it whole."""
    for start in range(0, recipients, lines_per_chunk):
        stop = min(start + lines_per_chunk, recipients)
        yield "".join(json.dumps(member(i)) + "\n" for i in range(start, stop)).encode()


def submit_uploaded_job(http: httpx.Client, tag: str, recipients: int) -> str:
    """Stream the audience to `POST /v1/audiences`, then create the job naming it."""
    reply = http.post(
        "/v1/audiences",
        content=ndjson_body(recipients),
        headers={"Content-Type": "application/x-ndjson"},
        timeout=JOB_TIMEOUT_S,
    )
    reply.raise_for_status()
    upload_id = reply.json()["id"]
    reply = http.post(
        "/v1/jobs", json=job_body(tag, audience_upload=upload_id), timeout=JOB_TIMEOUT_S
    )
    reply.raise_for_status()
    return str(reply.json()["id"])
