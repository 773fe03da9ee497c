"""Building the outbound message for a claimed attempt, after the claim.

The destination is decrypted and the template rendered only here, in
memory, for the duration of the call. Variables a dispatch-time minter adds
(a password-reset link) are used to render and then forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import psycopg

from tidings.dispatch.claim import Claimed
from tidings.domain.intent import Intent
from tidings.domain.segments import count_segments
from tidings.domain.senders import SenderNumbers
from tidings.platform.vault import Vault
from tidings.providers.messages import AttachmentRef, OutboundMessage
from tidings.store import ledger, reports, templates
from tidings.store.database import Database
from tidings.templates.limits import DEFAULT_LIMITS, RenderLimits
from tidings.templates.model import RenderError, TemplateError, TemplateRevision
from tidings.templates.render import RENDER_LIMIT_REASON, render

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.worker")
NO_SENDERS = SenderNumbers()
# A message whose values cannot be rendered at all (see quarantine.py).
UNRENDERABLE = "UNRENDERABLE"

# event_class -> callable(intent) returning extra variables (tokens, links)
Minter = Callable[[Intent], Mapping[str, Any]]


class PrepareError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class TemplateCache:
    """Revisions are immutable, so a process may keep them forever. It also
    carries the render limits its revisions are rendered with."""

    def __init__(self, limits: RenderLimits = DEFAULT_LIMITS) -> None:
        self._items: dict[tuple[str, str, int], TemplateRevision] = {}
        self.limits = limits

    def get(self, db: Database, intent: Intent) -> TemplateRevision:
        if intent.template_revision is None:
            raise PrepareError("TEMPLATE_MISSING")
        key = (intent.tenant_id, intent.template_name, intent.template_revision)
        found = self._items.get(key)
        if found is None:
            with db.transaction() as conn:
                found = templates.get_revision(conn, *key)
            if found is None:
                raise PrepareError("TEMPLATE_MISSING")
            self._items[key] = found
        return found


def prepare(
    db: Database,
    claimed: Claimed,
    vault: Vault,
    cache: TemplateCache,
    minters: Mapping[str, Minter],
    senders: SenderNumbers = NO_SENDERS,
) -> tuple[OutboundMessage, int | None, str | None]:
    """The message, and for SMS its segment count and encoding. Reads the
    database only for what the claim did not bring (a template not yet
    cached, a report reference)."""
    intent = claimed.intent
    revision = cache.get(db, intent)
    variables = dict(intent.variables)
    minter = minters.get(intent.event_class)
    if minter is not None:
        variables.update(minter(intent))
    try:
        rendered = render(revision, variables, limits=cache.limits)
    except RenderError as error:
        # A bomb fails for good (RENDER_LIMIT), like any render failure: a
        # retry would cost every worker that claims it the same again.
        limit = error.reason == RENDER_LIMIT_REASON
        raise PrepareError("RENDER_LIMIT" if limit else "RENDER_FAILED") from None
    except TemplateError:
        raise PrepareError("RENDER_FAILED") from None
    except (ValueError, ArithmeticError, RecursionError) as exc:
        # The tenant's values cannot be rendered (nested past the recursion
        # limit, a number out of range): the same on every try, so the
        # intent fails alone (dispatch/quarantine.py) instead of coming back.
        log.error("message unrenderable: %s", type(exc).__name__)
        raise PrepareError(UNRENDERABLE) from None
    to = _destination(db, claimed, vault)
    attachments = _attachments(db, intent) if intent.channel == "email" else ()
    message = OutboundMessage(
        channel="sms" if intent.channel == "sms" else "email",
        to=to,
        body=rendered.body,
        subject=rendered.subject,
        # The tenant's own number on this account, if the operator gave it
        # one (TIDINGS_SENDER_NUMBERS): a STOP to it ends this tenant's texts.
        sender=senders.number(claimed.provider, intent.tenant_id)
        if intent.channel == "sms"
        else None,
        attachments=attachments,
        provider_template_id=revision.provider_template_ids.get(claimed.provider),
        metadata={
            "tenant_id": intent.tenant_id,
            "intent_id": str(intent.id),
            "attempt_key": claimed.attempt_key,
            "correlation_id": intent.correlation_id or "",
            # Chooses the provider's stream: Postmark's broadcast stream, the
            # promotional SMS type of AWS and SNS (seed 003, R003.17).
            "purpose": intent.purpose,
        },
        validity_seconds=None,
    )
    if intent.channel != "sms":
        return message, None, None
    count = count_segments(rendered.body)
    return message, count.segments, count.encoding


def _attachments(db: Database, intent: Intent) -> tuple[AttachmentRef, ...]:
    """The report travels by reference; the adapter loads its bytes at send time."""
    if intent.report_id is None or intent.report_revision is None:
        return ()
    with db.transaction() as conn:
        row = reports.by_id(conn, intent.tenant_id, intent.report_id, intent.report_revision)
    if row is None:
        raise PrepareError("REPORT_MISSING")
    return (
        AttachmentRef(
            row["id"], row["revision"], row["filename"], row["content_type"], row["location"]
        ),
    )


def _destination(db: Database, claimed: Claimed, vault: Vault) -> str:
    intent = claimed.intent
    ciphertext = claimed.destination_ciphertext
    if ciphertext is None and intent.destination_hash is not None:
        with db.transaction() as conn:
            ciphertext = ledger.destination_ciphertext(
                conn, intent.tenant_id, intent.destination_hash
            )
    if ciphertext is None:
        raise PrepareError("DESTINATION_MISSING")
    return vault.decrypt(bytes(ciphertext))
