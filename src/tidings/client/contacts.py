"""The client's contacts: consent evidence, opt-outs and suppressions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from tidings.client.base import ClientBase
from tidings.domain.errors import NotFound
from tidings.domain.keywords import Keyword, classify
from tidings.domain.recipients import Channel, normalize_email, normalize_phone, parse_channel
from tidings.domain.storable import check_fields
from tidings.store import contacts as contact_store
from tidings.store.contacts import ConsentRecord

__all__ = ["ConsentRecord", "ContactMethods"]


class ContactMethods(ClientBase):
    def put_contact(
        self,
        ref: str,
        *,
        phone: str | None = None,
        email: str | None = None,
        timezone: str | None = None,
        locale: str | None = None,
        preferences: Mapping[str, Any] | None = None,
        consents: list[ConsentRecord] | tuple[ConsentRecord, ...] = (),
        conn: psycopg.Connection[Any] | None = None,
    ) -> None:
        """Record a contact and consent evidence (consent is never inferred)."""
        check_fields(
            {
                "ref": ref,
                "phone": phone,
                "email": email,
                "timezone": timezone,
                "locale": locale,
                "preferences": dict(preferences or {}),
            }
        )
        for consent in consents:
            check_fields(
                {
                    "consents.purpose": consent.purpose,
                    "consents.source": consent.source,
                    "consents.evidence_ref": consent.evidence_ref,
                }
            )
        self._ensure_tenant()
        with self.db.transaction(conn) as tx:
            contact_store.put_contact(
                tx,
                self.tenant,
                ref,
                self.vault,
                self.clock.now(),
                phone=phone,
                email=email,
                timezone=timezone,
                locale=locale,
                preferences=preferences,
                consents=consents,
            )

    def opt_out(self, channel: str, destination: str, *, source: str = "library") -> None:
        """Stop every further message on this channel to this destination."""
        self._ensure_tenant()
        with self.db.transaction() as conn:
            contact_store.opt_out(
                conn,
                self.tenant,
                channel,
                self._reference(channel, destination),
                source,
                self.clock.now(),
            )

    def contact(self, ref: str) -> dict[str, Any] | None:
        """The stored contact `ref`: hashes of its destinations (never the
        destinations), timezone, locale and preferences; None if unknown."""
        with self.db.transaction() as conn:
            return contact_store.contact(conn, self.tenant, ref)

    def opt_out_contact(self, ref: str, channel: str, *, source: str = "library") -> None:
        """Opt contact `ref`'s destination on `channel` out; NotFound when it
        has none there."""
        with self.db.transaction() as conn:
            row = contact_store.contact(conn, self.tenant, ref)
            destination = (
                None if row is None else row["phone_hash" if channel == "sms" else "email_hash"]
            )
            if destination is None:
                raise NotFound(f"no {channel} destination for contact {ref}")
            contact_store.opt_out(conn, self.tenant, channel, destination, source, self.clock.now())

    def opt_in(self, channel: str, destination: str) -> None:
        with self.db.transaction() as conn:
            contact_store.opt_in(conn, self.tenant, channel, self._reference(channel, destination))

    def suppress(self, channel: str, destination: str, reason: str = "operator") -> None:
        self._ensure_tenant()
        with self.db.transaction() as conn:
            contact_store.suppress(
                conn,
                self.tenant,
                channel,
                self._reference(channel, destination),
                reason,
                self.clock.now(),
            )

    def handle_inbound(self, sender: str, text: str, *, source: str = "inbound") -> Keyword:
        """An inbound SMS: STOP opts the number out before any further send."""
        keyword = classify(text)
        if keyword is Keyword.STOP:
            self.opt_out("sms", sender, source=source)
        elif keyword is Keyword.START:
            self.opt_in("sms", sender)
        return keyword

    def _reference(self, channel: str, destination: str) -> str:
        parsed = parse_channel(channel)
        if parsed is Channel.SMS:
            normalized, _ = normalize_phone(destination)
        else:
            normalized = normalize_email(destination)
        return self.vault.reference(parsed.value, normalized)
