"""The library entry point: `Tidings`.

    t = Tidings()                     # no DATABASE_URL: the embedded PostgreSQL
    t.migrate()
    intent = t.notify(idempotency_key="waitlist:771:1842:offer:1", channel="sms", ...)

Intents are here; contacts, jobs, a tenant's configuration and its API
keys are methods of the same object, written in `contacts.py`, `jobs.py`,
`setup.py` and `keys.py`; `serving.py` has what a server (the HTTP API)
needs beyond that: creates that say created or replayed, key checks, the
request rate, the event feed. Beneath it, `runtime` (database, clock, vault,
settings) is what workers, alerts, metrics and the console run on.

`notify(conn=...)` joins the caller's psycopg transaction: the intent
commits with the business decision that caused it, or not at all.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.client.base import as_uuid
from tidings.client.cancel import CancelCounts, CancelFilter, cancel_intent, cancel_many
from tidings.client.contacts import ContactMethods
from tidings.client.jobs import JobMethods
from tidings.client.keys import KeyMethods
from tidings.client.listing import ListingMethods
from tidings.client.rollout import RolloutMethods
from tidings.client.serving import ServingMethods
from tidings.client.setup import SetupMethods
from tidings.client.shadow import live_outcomes, shadow_report
from tidings.client.suppressions import SuppressionMethods
from tidings.domain.cancellation import parse_reason
from tidings.domain.clock import Clock, SystemClock
from tidings.domain.errors import Conflict, NotFound
from tidings.domain.intent import Intent, TimelineEntry
from tidings.intake.create import create_or_replay
from tidings.intake.request import IntentRequest
from tidings.platform import tracing
from tidings.platform.settings import Settings
from tidings.platform.vault import Vault, local_secret
from tidings.runtime import Runtime
from tidings.store import ledger
from tidings.store.database import Database
from tidings.store.database_clock import DatabaseClock
from tidings.store.embedded import embedded_url
from tidings.store.migrate import migrate as apply_migrations
from tidings.store.wakeups import Waker


class Tidings(
    ContactMethods,
    JobMethods,
    SetupMethods,
    KeyMethods,
    ServingMethods,
    ListingMethods,
    SuppressionMethods,
    RolloutMethods,
):
    def __init__(
        self,
        database_url: str | None = None,
        *,
        tenant: str | None = None,
        clock: Clock | None = None,
        settings: Settings | None = None,
        secret_key: str | None = None,
    ) -> None:
        settings = settings or Settings()
        tracing.configure(settings.tracing)  # once per process; `off` changes nothing
        self.url = database_url or settings.database_url or embedded_url(settings.resolved_home())
        self.tenant = tenant or settings.tenant
        db = Database(
            self.url, max_size=settings.pool_size, prepare=not settings.transaction_pooling
        )
        self.runtime = Runtime(
            db=db,
            clock=clock or _default_clock(settings, db),
            vault=Vault(secret_key or _secret(settings)),
            settings=settings,
            waker=Waker(self.url, prepare=not settings.transaction_pooling),
        )
        self._tenant_ready = False

    def migrate(self) -> list[str]:
        return [f"{m.version:04d}_{m.name}" for m in apply_migrations(self.url)]

    def close(self) -> None:
        if self.runtime.waker is not None:
            self.runtime.waker.close()
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
        alone = conn is None
        with self.db.statements() if alone else self.db.transaction(conn) as tx:
            intent, _ = create_or_replay(
                tx,
                self.tenant,
                request,
                self.vault,
                self.clock.now(),
                actor,
                self.runtime.intake,
                wake=self.runtime.waker.due if alone and self.runtime.waker else None,
            )
        return intent

    def get(self, intent_id: UUID | str) -> Intent:
        with self.db.transaction() as conn:
            intent = ledger.get_intent(conn, self.tenant, as_uuid(intent_id), with_attempts=True)
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
                tx, self.tenant, as_uuid(intent_id), why.value, self.clock.now(), actor
            )

    def cancel_job(
        self, job_id: UUID | str, reason: str, *, actor: str = "library"
    ) -> CancelCounts:
        """Cancel every open intent of a job, in batches; the counts canceled
        and already final. A job still preparing is refused (Conflict): its
        later pages would create intents after the cancel."""
        why = parse_reason(reason)
        job = self.job(job_id)
        # A quarantined job prepares no further page: canceling it is safe.
        if job["status"] == "preparing" and not job.get("quarantine_code"):
            raise Conflict("the job is still preparing; cancel it once it is dispatching")
        which = CancelFilter(job_id=as_uuid(job_id))
        return cancel_many(self.db, self.tenant, which, why.value, self.clock.now(), actor)

    def cancel_where(
        self,
        reason: str,
        *,
        event_class: str | None = None,
        recipient_ref: str | None = None,
        correlation_id: str | None = None,
        actor: str = "library",
    ) -> CancelCounts:
        """Cancel every open intent matching all the given filters (at least
        one), in batches; the counts canceled and already final."""
        why = parse_reason(reason)
        which = CancelFilter(None, event_class, recipient_ref, correlation_id)
        return cancel_many(self.db, self.tenant, which, why.value, self.clock.now(), actor)

    def shadow_report(
        self,
        live: Sequence[Mapping[str, Any]] | None = None,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, Any]:
        """Judge a shadow rollout: this tenant's shadow decisions in the window
        (by the decision's time), compared with the live system's outcomes
        `[{"idempotency_key", "sent", "code"?}]` when given (docs/replay.md)."""
        outcomes = None if live is None else live_outcomes(live)
        return shadow_report(self.db, self.tenant, outcomes, since, until, self.clock.now())

    def timeline(self, intent_id: UUID | str) -> list[TimelineEntry]:
        self.get(intent_id)
        with self.db.transaction() as conn:
            return ledger.timeline(conn, self.tenant, as_uuid(intent_id))


def _default_clock(settings: Settings, db: Database) -> Clock:
    return DatabaseClock(db) if settings.clock == "database" else SystemClock()


def _secret(settings: Settings) -> str:
    configured = settings.secret_key
    if configured is not None:
        return configured.get_secret_value()
    return local_secret(settings.resolved_home())
