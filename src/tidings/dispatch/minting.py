"""Minting secrets at dispatch: reset links and tokens exist only for the
call that carries them.

In the library a minter is a callable registered per event class. As a
service, tidings asks the application with a signed POST
(`TIDINGS_TOKEN_MINT_URL`, `TIDINGS_TOKEN_MINT_SECRET`): the body names the
intent, the answer is `{"variables": {...}}`. Neither the request, the
answer nor the variables are stored or logged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import httpx

from tidings.domain.intent import Intent
from tidings.signing import SIGNATURE_HEADER, sign

TIMEOUT = 5.0


class MintUnavailable(Exception):
    """The application could not mint now; nothing was sent, try again later."""


class HttpMinter:
    def __init__(self, url: str, secret: str, client: httpx.Client | None = None) -> None:
        self.url = url
        self._secret = secret
        self._client = client or httpx.Client(timeout=TIMEOUT)

    def __call__(self, intent: Intent) -> Mapping[str, Any]:
        body = json.dumps(
            {
                "intent_id": str(intent.id),
                "tenant_id": intent.tenant_id,
                "event_class": intent.event_class,
                "recipient_ref": intent.recipient_ref,
                "job_id": str(intent.job_id) if intent.job_id else None,
                "expires_at": intent.expires_at.isoformat() if intent.expires_at else None,
            }
        ).encode()
        headers = {
            "content-type": "application/json",
            SIGNATURE_HEADER: sign(self._secret, body, int(time.time())),
        }
        try:
            response = self._client.post(self.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise MintUnavailable(type(exc).__name__) from None
        if response.status_code != 200:
            raise MintUnavailable(f"HTTP {response.status_code}")
        variables = response.json().get("variables")
        if not isinstance(variables, dict):
            raise MintUnavailable("the answer has no variables object")
        return variables


def minters_from_env(environ: Mapping[str, str]) -> dict[str, HttpMinter]:
    url = environ.get("TIDINGS_TOKEN_MINT_URL")
    if not url:
        return {}
    secret = environ.get("TIDINGS_TOKEN_MINT_SECRET", "")
    if len(secret) < 16:
        raise ValueError("TIDINGS_TOKEN_MINT_SECRET must be at least 16 characters")
    classes = environ.get("TIDINGS_TOKEN_MINT_EVENT_CLASSES", "password_reset")
    minter = HttpMinter(url, secret)
    return {c.strip(): minter for c in classes.split(",") if c.strip()}
