"""The client's configuration of a tenant: templates, policies, controls
and the event webhook."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anyio import to_thread

from tidings.client.base import ClientBase
from tidings.domain.errors import InvalidInput
from tidings.domain.rollout import Scope
from tidings.platform.outbound import AddressPolicy
from tidings.store import controls as control_store
from tidings.store import event_webhooks
from tidings.store import policies as policy_store
from tidings.store import templates as template_store
from tidings.templates.model import TemplateRevision
from tidings.templates.validate import validate_revision


class SetupMethods(ClientBase):
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
        dispatch_variables: tuple[str, ...] | list[str] = (),
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
            dispatch_variables=tuple(dispatch_variables),
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
        purpose: str | None = None,
        event_class: str | None = None,
        live_percent: int | None = None,
        actor: str = "library",
    ) -> int:
        """Kill switch or shadow mode, for all or one channel, country,
        notification purpose and event class (None: all).

        Shadow mode's `live_percent` (0..100) sends for real to the
        recipients whose stable bucket is below it (domain/rollout.py); it
        only grows (a smaller one raises CohortShrink), None keeps the
        stored one (0 for a new control). Returns the live percent stored."""
        if kind not in control_store.KINDS:
            raise InvalidInput("kind", "use kill_switch or shadow_mode")
        _check_live_percent(kind, live_percent)
        self._ensure_tenant()
        with self.db.transaction() as conn:
            return control_store.set_control(
                conn,
                self.tenant,
                kind,
                enabled,
                scope=Scope(channel or "", country or "", purpose or "", event_class or ""),
                now=self.clock.now(),
                actor=actor,
                live_percent=live_percent,
            )

    def set_event_webhook(self, url: str, secret: str) -> None:
        """Push this tenant's application events, signed with `secret`, to `url`."""
        _check_event_webhook(url, secret)
        # Loopback, private, metadata...: refused now, and again at each push.
        AddressPolicy.from_env().check_url(url, tenant=self.tenant)
        self._store_event_webhook(url, secret)

    async def set_event_webhook_async(self, url: str, secret: str) -> None:
        """:meth:`set_event_webhook` for an event loop: the wait for the URL's
        name server holds no thread, and the write runs in a worker thread."""
        _check_event_webhook(url, secret)
        await AddressPolicy.from_env().check_url_async(url, tenant=self.tenant)
        await to_thread.run_sync(self._store_event_webhook, url, secret)

    def _store_event_webhook(self, url: str, secret: str) -> None:
        self._ensure_tenant()
        with self.db.transaction() as conn:
            encrypted = self.vault.encrypt(secret)
            event_webhooks.set_webhook(conn, self.tenant, url, encrypted, self.clock.now())

    def latest_templates(self) -> list[TemplateRevision]:
        """The newest revision of each template name, channel and locale."""
        with self.db.transaction() as conn:
            return template_store.latest_all(conn, self.tenant)

    def policy_versions(self) -> list[dict[str, Any]]:
        """Published policy versions, newest first."""
        with self.db.transaction() as conn:
            return policy_store.versions(conn, self.tenant)

    def controls(self) -> list[dict[str, Any]]:
        """Every control ever set, on or off; '' for a scope means all."""
        with self.db.transaction() as conn:
            return control_store.controls_of(conn, self.tenant)

    def remove_event_webhook(self) -> None:
        with self.db.transaction() as conn:
            event_webhooks.delete_webhook(conn, self.tenant)


def _check_event_webhook(url: str, secret: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise InvalidInput("url", "must be an http(s) URL")
    if len(secret) < 16:
        raise InvalidInput("secret", "must be at least 16 characters")


def _check_live_percent(kind: str, live_percent: int | None) -> None:
    if live_percent is None:
        return
    if kind != "shadow_mode":
        raise InvalidInput("live_percent", "only shadow mode has a live cohort")
    if isinstance(live_percent, bool) or not 0 <= live_percent <= 100:
        raise InvalidInput("live_percent", "a whole percent, 0 to 100")
