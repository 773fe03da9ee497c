"""Template revisions in PostgreSQL: publish (immutable), resolve, fetch.

A job or intent records the revision it was created with; publishing a new
revision never changes what an old intent renders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.errors import InvalidInput
from tidings.store.database import execute, fetch_all, fetch_one
from tidings.templates.locale_fallback import choose_revision
from tidings.templates.model import RevisionNotFoundError, TemplateRevision, normalize_locale

Conn = psycopg.Connection[Any]


def revision_from_row(row: Mapping[str, Any]) -> TemplateRevision:
    return TemplateRevision(
        tenant_id=row["tenant_id"],
        name=row["name"],
        revision=row["revision"],
        channel=row["channel"],
        locale=row["locale"],
        subject=row["subject"],
        body=row["body"],
        html_body=row["html_body"],
        required_variables=tuple(row["required_variables"]),
        attachment_policy=row["attachment_policy"],
        provider_template_ids=row["provider_template_ids"],
        dispatch_variables=tuple(row.get("dispatch_variables") or ()),
    )


def publish(conn: Conn, draft: TemplateRevision, now: datetime, actor: str) -> TemplateRevision:
    """Store `draft` as the next revision; identical content returns the latest."""
    locale = normalize_locale(draft.locale)
    latest = fetch_one(
        conn,
        "latest_same_content",
        {
            "tenant_id": draft.tenant_id,
            "name": draft.name,
            "channel": draft.channel,
            "locale": locale,
        },
    )
    if latest is not None and latest["content_hash"] == draft.content_hash:
        return revision_from_row(latest)
    row = fetch_one(
        conn, "next_template_revision", {"tenant_id": draft.tenant_id, "name": draft.name}
    )
    revision = int(row["revision"]) if row else 1
    stored = TemplateRevision(
        tenant_id=draft.tenant_id,
        name=draft.name,
        revision=revision,
        channel=draft.channel,
        locale=locale,
        subject=draft.subject,
        body=draft.body,
        html_body=draft.html_body,
        required_variables=draft.required_variables,
        attachment_policy=draft.attachment_policy,
        provider_template_ids=draft.provider_template_ids,
        dispatch_variables=draft.dispatch_variables,
    )
    execute(conn, "insert_template", _params(stored, now, actor))
    return stored


def _params(rev: TemplateRevision, now: datetime, actor: str) -> dict[str, Any]:
    return {
        "tenant_id": rev.tenant_id,
        "name": rev.name,
        "revision": rev.revision,
        "channel": rev.channel,
        "locale": rev.locale,
        "subject": rev.subject,
        "body": rev.body,
        "html_body": rev.html_body,
        "required_variables": list(rev.required_variables),
        "dispatch_variables": list(rev.dispatch_variables),
        "attachment_policy": rev.attachment_policy,
        "provider_template_ids": dict(rev.provider_template_ids),
        "content_hash": rev.content_hash,
        "now": now,
        "actor": actor,
    }


def resolve(
    conn: Conn, tenant_id: str, name: str, channel: str, locale: str | None, revision: int | None
) -> TemplateRevision:
    """The revision an intent will render: the one asked for, or the newest
    in the best locale match."""
    if revision is not None:
        found = get_revision(conn, tenant_id, name, revision)
        return resolve_among([] if found is None else [found], name, channel, locale, revision)
    rows = fetch_all(
        conn, "template_candidates", {"tenant_id": tenant_id, "name": name, "channel": channel}
    )
    return resolve_among([revision_from_row(r) for r in rows], name, channel, locale, None)


def resolve_among(
    candidates: Sequence[TemplateRevision | Mapping[str, Any]],
    name: str,
    channel: str,
    locale: str | None,
    revision: int | None,
) -> TemplateRevision:
    """`resolve` over candidates already read (rows or revisions)."""
    found = [c if isinstance(c, TemplateRevision) else revision_from_row(c) for c in candidates]
    if revision is not None:
        match = [f for f in found if f.revision == revision and f.channel == channel]
        if not match:
            raise InvalidInput("template", f"no {channel} template {name!r} revision {revision}")
        return match[0]
    try:
        return choose_revision([f for f in found if f.channel == channel], locale)
    except RevisionNotFoundError:
        raise InvalidInput("template", f"no {channel} template named {name!r}") from None


def get_revision(conn: Conn, tenant_id: str, name: str, revision: int) -> TemplateRevision | None:
    row = fetch_one(
        conn, "template_revision", {"tenant_id": tenant_id, "name": name, "revision": revision}
    )
    return revision_from_row(row) if row else None


def latest_all(conn: Conn, tenant_id: str) -> list[TemplateRevision]:
    return [p.revision for p in latest_published(conn, tenant_id)]


@dataclass(frozen=True)
class Published:
    """A stored revision, and when and by whom it was published."""

    revision: TemplateRevision
    at: datetime
    by: str


def _published(row: Mapping[str, Any]) -> Published:
    return Published(revision_from_row(row), row["created_at"], row["created_by"])


def latest_published(conn: Conn, tenant_id: str) -> list[Published]:
    """The newest revision of each name, channel and locale."""
    return [_published(r) for r in fetch_all(conn, "templates_list", {"tenant_id": tenant_id})]


def history(conn: Conn, tenant_id: str, name: str) -> list[Published]:
    """Every revision of `name`, newest first; [] for a name never published."""
    rows = fetch_all(conn, "template_history", {"tenant_id": tenant_id, "name": name})
    return [_published(r) for r in rows]
