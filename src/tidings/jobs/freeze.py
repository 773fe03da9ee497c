"""Creating a job: record its decision inputs and freeze its audience.

The audience becomes `job_recipients` rows in the caller's transaction, so
the set evaluated is exactly the set committed. Members named only by ref
take their destinations, time zone and preferences from the contact records
as that transaction sees them: one consistent snapshot. Raw destinations go
only into the encrypted `destinations` table.

An inline audience (a list) is resolved in Python and COPYed. An uploaded
one (`audience_upload`) is already staged in the database and is frozen by
INSERT ... SELECT, so the job's transaction never holds it in memory; a
library caller's iterable is staged the same way first, in this transaction.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from tidings.domain.channels import Mode
from tidings.domain.errors import (
    AudienceUploadUsed,
    IdempotencyConflict,
    InvalidInput,
    NotFound,
    PolicyMissing,
)
from tidings.domain.ids import uuid7
from tidings.domain.keys import fingerprint
from tidings.domain.policy import POLICY_MISSING_HELP
from tidings.domain.policy_document import Policy
from tidings.jobs import uploads
from tidings.jobs.request import AudienceMember, JobRequest
from tidings.platform.logging import job_context, log_context
from tidings.platform.vault import Vault
from tidings.providers.template_ids import ensure_template_ids
from tidings.store import jobs, ledger, policies, reports, templates

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.jobs")


def create_job(
    conn: Conn,
    tenant: str,
    request: JobRequest,
    vault: Vault,
    now: datetime,
    actor: str,
    template_ids: Mapping[str, Collection[str]] | None = None,
) -> tuple[dict[str, Any], bool]:
    """The job for this key: created and frozen now (True), or the first (False).

    ``template_ids`` maps a channel to the configured providers that need a
    provider-side template id for it (providers/template_ids.py): a revision
    lacking one is refused (ProviderMappingMissing) before anything is frozen.
    """
    needs = template_ids or {}
    job, created = _create(conn, tenant, request, vault, now, actor, needs)
    if created:
        context = job_context(job["id"], job.get("report_id"), job.get("report_revision"))
        with log_context(tenant_id=tenant, **context):
            # In the creating transaction: the id is the one the caller gets back.
            log.info("job frozen", extra={"audience_size": job["audience_size"]})
    return job, created


def _create(
    conn: Conn,
    tenant: str,
    request: JobRequest,
    vault: Vault,
    now: datetime,
    actor: str,
    needs: Mapping[str, Collection[str]],
) -> tuple[dict[str, Any], bool]:
    if request.audience_upload is not None:
        # The id stands for the body's audience: the same id is the same job.
        identity = f"upload:{request.audience_upload}"
        return _from_upload(
            conn, tenant, request, request.audience_upload, identity, now, actor, needs
        )
    if request.audience_stream is not None:
        return _from_stream(conn, tenant, request, vault, now, actor, needs)
    rows = _recipient_rows(conn, tenant, request.audience, vault)
    version = _audience_version(rows)
    request_hash = _request_hash(request, version)
    existing = _by_key(conn, tenant, request)
    if existing is not None:
        return _replayed(existing, request_hash), False
    params = _job_params(conn, tenant, request, len(rows), version, request_hash, now, actor, needs)
    job = jobs.insert(conn, params)
    if job is None:  # a concurrent create with the same key won
        return _replayed(_must(_by_key(conn, tenant, request)), request_hash), False
    _store_destinations(conn, tenant, request.audience, rows, vault, now)
    _copy_recipients(conn, tenant, job["id"], rows)
    return job, True


def _from_stream(
    conn: Conn,
    tenant: str,
    request: JobRequest,
    vault: Vault,
    now: datetime,
    actor: str,
    needs: Mapping[str, Collection[str]],
) -> tuple[dict[str, Any], bool]:
    assert request.audience_stream is not None
    members = uploads.items(request.audience_stream)
    upload = uploads.stage(conn, tenant, members, vault, now, actor, uploads.Items())
    # Identified by content, not by the fresh upload: passing the same
    # members again under the same key is a replay.
    job, created = _from_upload(conn, tenant, request, upload.id, upload.version, now, actor, needs)
    if not created:
        uploads.discard(conn, tenant, upload.id)
    return job, created


def _from_upload(
    conn: Conn,
    tenant: str,
    request: JobRequest,
    upload_id: UUID,
    identity: str,
    now: datetime,
    actor: str,
    needs: Mapping[str, Collection[str]],
) -> tuple[dict[str, Any], bool]:
    request_hash = _request_hash(request, identity)
    existing = _by_key(conn, tenant, request)
    if existing is not None:
        return _replayed(existing, request_hash), False
    upload = uploads.lock(conn, tenant, upload_id, now)
    if upload is None:
        raise NotFound(f"no audience upload {upload_id} (unknown, or expired)")
    if upload["job_id"] is not None:
        # The lock may have waited for a create with this very key.
        existing = _by_key(conn, tenant, request)
        if existing is not None:
            return _replayed(existing, request_hash), False
        raise AudienceUploadUsed(
            f"audience upload {upload_id} was already used by job {upload['job_id']};"
            " upload the audience again for a new job"
        )
    params = _job_params(
        conn, tenant, request, upload["size"], upload["version"], request_hash, now, actor, needs
    )
    job = jobs.insert(conn, params)
    if job is None:  # a concurrent create with the same key won
        return _replayed(_must(_by_key(conn, tenant, request)), request_hash), False
    uploads.freeze_into(conn, tenant, upload_id, job["id"], now)
    return job, True


def _by_key(conn: Conn, tenant: str, request: JobRequest) -> dict[str, Any] | None:
    return jobs.by_key(conn, tenant, request.idempotency_key)


def _must(job: dict[str, Any] | None) -> dict[str, Any]:
    assert job is not None
    return job


def _replayed(existing: dict[str, Any], request_hash: str) -> dict[str, Any]:
    if existing["request_hash"] != request_hash:
        raise IdempotencyConflict(
            f"idempotency_key {existing['idempotency_key']!r} was used for a different job"
        )
    return existing


def _job_params(
    conn: Conn,
    tenant: str,
    request: JobRequest,
    audience_size: int,
    audience_version: str,
    request_hash: str,
    now: datetime,
    actor: str,
    needs: Mapping[str, Collection[str]],
) -> dict[str, Any]:
    resolved = {
        channel: templates.resolve(
            conn, tenant, request.template_name, channel, None, request.template_revision
        )
        for channel in request.channels
    }
    for channel, rev in resolved.items():
        # Refused now, not at send time: a job frozen with a revision its
        # provider cannot send would fail every recipient, one by one.
        ensure_template_ids(rev, needs.get(channel, ()))
    revisions = {channel: rev.revision for channel, rev in resolved.items()}
    policy = policies.current(conn, tenant)
    if policy is None:
        raise PolicyMissing(POLICY_MISSING_HELP)
    _check_fallback(policy, request)
    if request.report is not None:
        report = reports.by_id(conn, tenant, request.report[0], request.report[1])
        if report is None:
            raise InvalidInput(
                "report", f"no report {request.report[0]} revision {request.report[1]}"
            )
    expires_at = request.expires_at
    if request.token_ttl_seconds is not None:
        token_expiry = now + timedelta(seconds=request.token_ttl_seconds)
        expires_at = min(expires_at, token_expiry) if expires_at else token_expiry
    retention = policy.retention
    return {
        "tenant_id": tenant,
        "id": uuid7(now),
        "idempotency_key": request.idempotency_key,
        "request_hash": request_hash,
        "event_class": request.event_class,
        "event_reason": request.event_reason,
        "purpose": request.purpose,
        "template_name": request.template_name,
        "template_revisions": revisions,
        "channels": list(request.channels),
        "channel_mode": request.mode.value,
        "variables": dict(request.variables),
        "policy_version": policy.version,
        "audience_version": audience_version,
        "audience_size": audience_size,
        "report_id": request.report[0] if request.report else None,
        "report_revision": request.report[1] if request.report else None,
        "token_ttl_seconds": request.token_ttl_seconds,
        "expires_at": expires_at,
        "evidence_expires_at": now + timedelta(days=retention.recipient_evidence_days),
        "facts_expire_at": now + timedelta(days=retention.job_facts_days),
        "actor": actor,
        "now": now,
    }


def _recipient_rows(
    conn: Conn, tenant: str, audience: Sequence[AudienceMember], vault: Vault
) -> list[tuple[Any, ...]]:
    known = _contacts_for(conn, tenant, [m.ref for m in audience if not (m.phone or m.email)])
    rows = []
    for seq, member in enumerate(audience, start=1):
        contact = known.get(member.ref, {})
        phone_hash = (
            vault.reference("sms", member.phone) if member.phone else contact.get("phone_hash")
        )
        email_hash = (
            vault.reference("email", member.email) if member.email else contact.get("email_hash")
        )
        preferences = member.preferences or tuple(
            contact.get("preferences", {}).get("channels", ())
        )
        rows.append(
            (
                member.ref,
                phone_hash,
                email_hash,
                member.phone_country,
                None,
                member.timezone or contact.get("timezone"),
                member.locale or contact.get("locale"),
                list(preferences),
                dict(member.variables),
                seq,
            )
        )
    return rows


def _contacts_for(conn: Conn, tenant: str, refs: list[str]) -> dict[str, dict[str, Any]]:
    if not refs:
        return {}
    return {r["ref"]: r for r in jobs.contacts_by_refs(conn, tenant, refs)}


def _request_hash(request: JobRequest, audience: str) -> str:
    return fingerprint(
        {
            "event_class": request.event_class,
            "purpose": request.purpose,
            "template": [request.template_name, request.template_revision],
            "channels": list(request.channels),
            "mode": request.mode.value,
            "variables": request.variables,
            "report": request.report,
            "token_ttl_seconds": request.token_ttl_seconds,
            "expires_at": request.expires_at.isoformat() if request.expires_at else None,
            "event_reason": request.event_reason,
            "audience": audience,
        }
    )


def _audience_version(rows: Iterable[tuple[Any, ...]]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, default=str).encode())
    return f"sha256:{digest.hexdigest()[:32]}"


def _store_destinations(
    conn: Conn,
    tenant: str,
    audience: Sequence[AudienceMember],
    rows: Sequence[tuple[Any, ...]],
    vault: Vault,
    now: datetime,
) -> None:
    """The audience's own destinations, under the references `rows` already hold."""
    ledger.store_job_destinations(conn, _sealed(tenant, audience, rows, vault, now))


def _sealed(
    tenant: str,
    audience: Sequence[AudienceMember],
    rows: Sequence[tuple[Any, ...]],
    vault: Vault,
    now: datetime,
) -> Iterator[tuple[Any, ...]]:
    # Encrypted as the COPY takes them: the audience is never held sealed whole.
    for member, (_, phone_hash, email_hash, *_rest) in zip(audience, rows, strict=True):
        if member.phone:
            sealed = vault.encrypt(member.phone)
            yield (tenant, phone_hash, "sms", sealed, member.phone_country, now)
        if member.email:
            sealed = vault.encrypt(member.email)
            yield (tenant, email_hash, "email", sealed, None, now)


def _copy_recipients(conn: Conn, tenant: str, job_id: Any, rows: Sequence[tuple[Any, ...]]) -> None:
    # Reordered into the columns of copy_job_recipients (jobs.sql).
    jobs.copy_recipients(
        conn,
        (
            (
                tenant,
                job_id,
                seq,
                ref,
                phone_hash,
                email_hash,
                phone_cc,
                email_cc,
                tz,
                locale,
                prefs,
                Jsonb(variables),
            )
            for (
                ref,
                phone_hash,
                email_hash,
                phone_cc,
                email_cc,
                tz,
                locale,
                prefs,
                variables,
                seq,
            ) in rows
        ),
    )


def _check_fallback(policy: Policy, request: JobRequest) -> None:
    """`first_available` only where the purpose's policy allows it."""
    if request.mode is not Mode.FIRST_AVAILABLE:
        return
    rule = policy.purposes.get(request.purpose)
    if rule is None or not rule.channel_fallback:
        raise InvalidInput(
            "channel_mode",
            f"first_available needs purposes.{request.purpose}.channel_fallback: true in the"
            f" policy (version {policy.version} does not allow it)",
        )
