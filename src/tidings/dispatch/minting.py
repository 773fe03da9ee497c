"""Minting secrets at dispatch: reset links and tokens exist only for the
call that carries them.

In the library a minter is a callable registered per event class. As a
service, tidings asks the application with a signed POST
(`TIDINGS_TOKEN_MINT_URL`, `TIDINGS_TOKEN_MINT_SECRET`): the body names the
intent, the answer is `{"variables": {...}}`. Neither the request, the
answer nor the variables are stored or logged.

A reset link is a credential, and any tenant's `send` key can name any
event class and any recipient ref: chosen by event class alone, the minter
made a fresh link for a victim's account and tidings sent it wherever the
caller said. So minting is only for the tenants (or `tenant:event_class`
pairs) in `TIDINGS_TOKEN_MINT_TENANTS`; any other intent fails
(MINT_NOT_ALLOWED) before the application is asked. The request names the
tenant, the channel and the destination's keyed reference (never the
destination itself), so the application can check that the link goes to
an address of that account.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from tidings.dispatch.message import PrepareError
from tidings.domain.intent import Intent
from tidings.platform.signing import signed_headers

log = logging.getLogger("tidings.minting")
TIMEOUT = 5.0
MINT_NOT_ALLOWED = "MINT_NOT_ALLOWED"


class MintUnavailable(Exception):
    """The application could not mint now; nothing was sent, try again later."""


class MintNotAllowed(PrepareError):
    """This tenant may not have tokens minted for this event class: the
    intent fails, and the application is never asked."""

    def __init__(self) -> None:
        super().__init__(MINT_NOT_ALLOWED)


@dataclass(frozen=True)
class MintScope:
    """Who may have tokens minted: (tenant, event class), or (tenant, None)
    for every event class that has a minter."""

    entries: frozenset[tuple[str, str | None]]

    @classmethod
    def parse(cls, text: str) -> MintScope:
        """`tenant` or `tenant:event_class` entries, comma-separated."""
        entries: set[tuple[str, str | None]] = set()
        for entry in (e.strip() for e in text.split(",")):
            if not entry:
                continue
            tenant, _, event_class = (part.strip() for part in entry.partition(":"))
            if not tenant:
                raise ValueError(f"TIDINGS_TOKEN_MINT_TENANTS: {entry!r} names no tenant")
            entries.add((tenant, event_class or None))
        return cls(frozenset(entries))

    def allows(self, tenant: str, event_class: str) -> bool:
        return (tenant, None) in self.entries or (tenant, event_class) in self.entries


class HttpMinter:
    def __init__(
        self, url: str, secret: str, scope: MintScope, client: httpx.Client | None = None
    ) -> None:
        self.url = url
        self.scope = scope
        self._secret = secret
        self._client = client or httpx.Client(timeout=TIMEOUT)

    def __call__(self, intent: Intent) -> Mapping[str, Any]:
        if not self.scope.allows(intent.tenant_id, intent.event_class):
            raise MintNotAllowed
        body = json.dumps(
            {
                "intent_id": str(intent.id),
                "tenant_id": intent.tenant_id,
                "event_class": intent.event_class,
                "recipient_ref": intent.recipient_ref,
                # Where the link goes, keyed (Vault.reference over the
                # normalized address): the application can compare it with
                # the reference of the account's own address before minting.
                "channel": intent.channel,
                "destination_hash": intent.destination_hash,
                "job_id": str(intent.job_id) if intent.job_id else None,
                "expires_at": intent.expires_at.isoformat() if intent.expires_at else None,
            }
        ).encode()
        headers = {
            "content-type": "application/json",
            **signed_headers(self._secret, body, int(time.time()), f"mint_{intent.id}"),
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
    scope = MintScope.parse(environ.get("TIDINGS_TOKEN_MINT_TENANTS", ""))
    if not scope.entries:
        log.warning(
            "TIDINGS_TOKEN_MINT_URL is set but TIDINGS_TOKEN_MINT_TENANTS is empty: "
            "every intent that needs a minted token fails (MINT_NOT_ALLOWED)"
        )
    minter = HttpMinter(url, secret, scope)
    return {c.strip(): minter for c in classes.split(",") if c.strip()}
