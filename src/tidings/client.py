"""The library entry point: `Tidings`.

    t = Tidings()                     # no DATABASE_URL: the embedded PostgreSQL
    t.migrate()
    intent = t.notify(idempotency_key="waitlist:771:1842:offer:1", channel="sms", ...)

`notify(conn=...)` joins the caller's psycopg transaction: the intent
commits with the business decision that caused it, or not at all.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.config import Settings
from tidings.domain.cancellation import parse_reason
from tidings.domain.clock import Clock, SystemClock
from tidings.domain.errors import AlreadyTerminal, InvalidInput, NotFound, StaleTransition
from tidings.domain.intent import Intent, TimelineEntry
from tidings.domain.keywords import Keyword, classify
from tidings.domain.recipients import Channel, normalize_email, normalize_phone, parse_channel
from tidings.domain.storable import check_fields
from tidings.domain.transitions import Event
from tidings.intake import IntentRequest, create_or_replay
from tidings.jobs.freeze import create_job
from tidings.jobs.prepare import prepare_next
from tidings.jobs.request import parse_job
from tidings.jobs.status import job_recipients, job_status
from tidings.jobs.uploads import Items, Upload
from tidings.jobs.uploads import items as upload_items
from tidings.jobs.uploads import stage as stage_upload
from tidings.outbound import AddressPolicy
from tidings.store import contacts as contact_store
from tidings.store import ledger
from tidings.store import policies as policy_store
from tidings.store import templates as template_store
from tidings.store.contacts import ConsentRecord
from tidings.store.database import Database, execute
from tidings.store.embedded import embedded_url
from tidings.store.migrate import migrate as apply_migrations
from tidings.templates.model import TemplateRevision
from tidings.templates.validate import validate_revision
from tidings.vault import Vault, local_secret

# A cancel retries when it loses a race to a worker; each retry re-reads the
# committed state, so a handful always suffices unless something is broken.
CANCEL_RETRIES = 8


class Tidings:
    def __init__(
        self,
        database_url: str | None = None,
        *,
        tenant: str | None = None,
        clock: Clock | None = None,
        settings: Settings | None = None,
        secret_key: str | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.url = (
            database_url
            or self.settings.database_url
            or embedded_url(self.settings.resolved_home())
        )
        self.tenant = tenant or self.settings.tenant
        self.clock: Clock = clock or SystemClock()
        self.vault = Vault(secret_key or self._secret())
        self.db = Database(self.url, max_size=self.settings.pool_size)
        self._tenant_ready = False

    def _secret(self) -> str:
        configured = self.settings.secret_key
        if configured is not None:
            return configured.get_secret_value()
        return local_secret(self.settings.resolved_home())

    def migrate(self) -> list[str]:
        return [f"{m.version:04d}_{m.name}" for m in apply_migrations(self.url)]

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Tidings:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def for_tenant(self, tenant: str) -> Tidings:
        """The same engine acting for `tenant`: shares the pool, vault and clock.

        Cheap enough to make per request (the API does). Close only the
        original; closing a view would close the shared pool.
        """
        view = copy.copy(self)
        view.tenant = tenant
        view._tenant_ready = False
        return view

    def _ensure_tenant(self) -> None:
        # Committed on our own connection, so a caller's rollback never
        # takes the tenant row with it.
        if not self._tenant_ready:
            with self.db.transaction() as conn:
                ledger.ensure_tenant(conn, self.tenant)
            self._tenant_ready = True

    def notify(
        self,
        *,
        idempotency_key: str,
        channel: str,
        recipient: Mapping[str, Any],
        template: str | Mapping[str, Any],
        variables: Mapping[str, Any] | None = None,
        purpose: str,
        event_class: str,
        expires_at: datetime | None = None,
        not_before: datetime | None = None,
        correlation_id: str | None = None,
        resend_budget: int | None = None,
        conn: psycopg.Connection[Any] | None = None,
        actor: str = "library",
    ) -> Intent:
        """Record the intent to notify; the same key and body return the first."""
        request = IntentRequest.parse(
            idempotency_key=idempotency_key,
            channel=channel,
            recipient=recipient,
            template=template,
            variables=variables,
            purpose=purpose,
            event_class=event_class,
            expires_at=expires_at,
            not_before=not_before,
            correlation_id=correlation_id,
            resend_budget=resend_budget,
            now=self.clock.now(),
        )
        self._ensure_tenant()
        # Alone, the create is one statement (the intent, its destination and
        # its audit row together) and needs no transaction around it; inside
        # the caller's transaction it commits or rolls back with their work.
        with self.db.transaction(conn) if conn is not None else self.db.statements() as tx:
            intent, _ = create_or_replay(
                tx, self.tenant, request, self.vault, self.clock.now(), actor
            )
        return intent

    def publish_template(
        self,
        name: str,
        *,
        channel: str,
        body: str,
        locale: str = "en",
        subject: str | None = None,
        html_body: str | None = None,
        required_variables: tuple[str, ...] | list[str] = (),
        attachment_policy: str = "none",
        provider_template_ids: Mapping[str, str] | None = None,
        required_providers: tuple[str, ...] = (),
        actor: str = "library",
    ) -> TemplateRevision:
        """Publish an immutable revision; the same content returns the latest."""
        draft = TemplateRevision(
            tenant_id=self.tenant,
            name=name,
            revision=1,
            channel=channel,
            locale=locale,
            subject=subject,
            body=body,
            html_body=html_body,
            required_variables=tuple(required_variables),
            attachment_policy=attachment_policy,
            provider_template_ids=provider_template_ids or {},
        )
        found = validate_revision(draft, required_providers, self.settings.render_limits())
        errors = [p for p in found if p.is_error]
        if errors:
            raise InvalidInput(f"template.{errors[0].field}", "; ".join(p.message for p in errors))
        self._ensure_tenant()
        with self.db.transaction() as conn:
            return template_store.publish(conn, draft, self.clock.now(), actor)

    def publish_policy(self, document: Mapping[str, Any], *, actor: str = "library") -> str:
        """Publish an immutable policy version; new intents freeze it."""
        self._ensure_tenant()
        with self.db.transaction() as conn:
            return policy_store.publish(
                conn, self.tenant, document, self.clock.now(), actor
            ).version

    def set_control(
        self,
        kind: str,
        enabled: bool,
        *,
        channel: str | None = None,
        country: str | None = None,
        actor: str = "library",
    ) -> None:
        """Kill switch or shadow mode, for all or one channel and country."""
        if kind not in ("kill_switch", "shadow_mode"):
            raise InvalidInput("kind", "use kill_switch or shadow_mode")
        self._ensure_tenant()
        with self.db.transaction() as conn:
            execute(
                conn,
                "set_control",
                {
                    "tenant_id": self.tenant,
                    "kind": kind,
                    "channel": channel or "",
                    "country": (country or "").upper(),
                    "enabled": enabled,
                    "now": self.clock.now(),
                    "actor": actor,
                },
            )

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

    def create_job(
        self, *, conn: psycopg.Connection[Any] | None = None, actor: str = "library", **request: Any
    ) -> dict[str, Any]:
        """Record a bulk job and freeze its audience; workers prepare and send it.

        `audience` is a list of recipients, or any other iterable (a
        generator over your database, say): that is staged in chunks as it
        is consumed, never held whole. Or give `audience_upload=` the id of
        an uploaded audience (`upload_audience`) instead.
        """
        parsed = parse_job(request)
        self._ensure_tenant()
        with self.db.transaction(conn) as tx:
            job, _ = create_job(tx, self.tenant, parsed, self.vault, self.clock.now(), actor)
        return job

    def upload_audience(
        self,
        audience: Iterable[Mapping[str, Any]],
        *,
        conn: psycopg.Connection[Any] | None = None,
        actor: str = "library",
    ) -> Upload:
        """Stage an audience for one later job (`create_job(audience_upload=upload.id)`).

        Consumed as it is staged, in chunks, so its size does not matter;
        kept for a day (`UPLOAD_TTL`) if no job uses it.
        """
        self._ensure_tenant()
        with self.db.transaction(conn) as tx:
            return stage_upload(
                tx,
                self.tenant,
                upload_items(audience),
                self.vault,
                self.clock.now(),
                actor,
                Items(),
            )

    def prepare_jobs(self) -> int:
        """Resolve channels and create intents for waiting jobs (workers do this too)."""
        done = 0
        while prepare_next(self.db, self.clock.now()) is not None:
            done += 1
        return done

    def job(self, job_id: UUID | str) -> dict[str, Any]:
        with self.db.transaction() as conn:
            return job_status(conn, self.tenant, _uuid(job_id))

    def job_recipients(
        self, job_id: UUID | str, *, after: int = 0, limit: int = 100
    ) -> dict[str, Any]:
        with self.db.transaction() as conn:
            return job_recipients(conn, self.tenant, _uuid(job_id), after, limit)

    def register_report(
        self,
        report_id: str,
        revision: int,
        *,
        filename: str,
        content_type: str,
        location: str,
        size_bytes: int | None = None,
    ) -> None:
        """A generated report, by reference: attempts attach it at send time."""
        self._ensure_tenant()
        with self.db.transaction() as conn:
            execute(
                conn,
                "insert_report",
                {
                    "tenant_id": self.tenant,
                    "id": report_id,
                    "revision": revision,
                    "filename": filename,
                    "content_type": content_type,
                    "location": location,
                    "size_bytes": size_bytes,
                    "now": self.clock.now(),
                },
            )

    def set_event_webhook(self, url: str, secret: str) -> None:
        """Push this tenant's application events, signed with `secret`, to `url`."""
        if not url.startswith(("http://", "https://")):
            raise InvalidInput("url", "must be an http(s) URL")
        if len(secret) < 16:
            raise InvalidInput("secret", "must be at least 16 characters")
        # Loopback, private, metadata...: refused now, and again at each push.
        AddressPolicy.from_env().check_url(url)
        self._ensure_tenant()
        with self.db.transaction() as conn:
            execute(
                conn,
                "set_event_webhook",
                {
                    "tenant_id": self.tenant,
                    "url": url,
                    "secret": self.vault.encrypt(secret),
                    "now": self.clock.now(),
                },
            )

    def remove_event_webhook(self) -> None:
        with self.db.transaction() as conn:
            execute(conn, "delete_event_webhook", {"tenant_id": self.tenant})

    def get(self, intent_id: UUID | str) -> Intent:
        with self.db.transaction() as conn:
            intent = ledger.get_intent(conn, self.tenant, _uuid(intent_id), with_attempts=True)
        if intent is None:
            raise NotFound(f"no intent {intent_id}")
        return intent

    def cancel(
        self,
        intent_id: UUID | str,
        reason: str,
        *,
        conn: psycopg.Connection[Any] | None = None,
        actor: str = "library",
    ) -> Intent:
        """Stop any further attempt. A message already accepted cannot be unsent."""
        why = parse_reason(reason)
        with self.db.transaction(conn) as tx:
            return cancel_intent(
                tx, self.tenant, _uuid(intent_id), why.value, self.clock.now(), actor
            )

    def timeline(self, intent_id: UUID | str) -> list[TimelineEntry]:
        self.get(intent_id)
        with self.db.transaction() as conn:
            return ledger.timeline(conn, self.tenant, _uuid(intent_id))


def cancel_intent(
    conn: psycopg.Connection[Any],
    tenant: str,
    intent_id: UUID,
    reason: str,
    now: datetime,
    actor: str,
) -> Intent:
    for _ in range(CANCEL_RETRIES):
        intent = ledger.get_intent(conn, tenant, intent_id)
        if intent is None:
            raise NotFound(f"no intent {intent_id}")
        if intent.terminal:
            raise AlreadyTerminal(intent.state.value)
        try:
            move = ledger.Move(cancel_reason=reason)
            return ledger.transition(
                conn,
                intent,
                Event.CANCEL,
                now=now,
                actor=actor,
                move=move,
                detail={"reason": reason},
            )
        except StaleTransition:
            continue
    raise StaleTransition(f"intent {intent_id} kept changing; cancel not applied")


def _uuid(value: UUID | str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise NotFound(f"no intent {value}") from None
