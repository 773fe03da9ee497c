"""The harness's own HTTP calls, all plain HTTP to a local peer.

httpx builds a TLS context for every `Client`, loading the CA bundle, and
`httpx.get` or `httpx.request` makes a `Client` per call: in the hour's
soak that was 70% of the harness's CPU (docs/reliability.md), taken from
the fleet it drives. One context, built once, is handed to each call.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

# Never used for a handshake (the peers speak plain HTTP), only spared the
# rebuild; read-only once made, so the threads may share it.
TLS = ssl.create_default_context()


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    """`httpx.request`, without building a TLS context for it."""
    return httpx.request(method, url, verify=TLS, **kwargs)
