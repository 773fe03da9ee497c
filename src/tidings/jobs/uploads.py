"""Uploaded audiences: members staged in PostgreSQL as they arrive.

An audience of any size passes through memory one chunk at a time: `stage`
encrypts each chunk's destinations, COPYs it in, and folds it into the
audience version. The library stages inside the caller's transaction, so
a bad member anywhere leaves nothing behind; the HTTP route commits chunk
by chunk (`begin`, `Staging`) and discards the upload on error, because a
transaction held open while a client trickles its body would hold a pooled
connection hostage. A ref given twice is found by the database
once every member is in, since remembering refs would grow with the
audience. A job freezes an upload with INSERT ... SELECT (`freeze_into`)
and consumes it: an upload serves one job.

Staged rows hold destinations only encrypted and by keyed hash, as the
`destinations` table does; the version hashes those references, never the
raw values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from tidings.domain.errors import Conflict, InvalidInput, InvalidLine
from tidings.domain.ids import uuid7
from tidings.jobs.request import MAX_AUDIENCE, AudienceMember, parse_member
from tidings.platform.vault import Vault
from tidings.store import audience_uploads, jobs, ledger

Conn = psycopg.Connection[Any]

CHUNK_ROWS = 1000
# Long enough to upload now and create the job after a review; short
# enough that an abandoned upload's encrypted destinations do not linger.
UPLOAD_TTL = timedelta(hours=24)
# Uploads a tenant may hold unused (in progress, or waiting for a job) and
# unexpired: with the body limit (TIDINGS_MAX_UPLOAD_BYTES, 1 GiB) this
# bounds what one tenant can leave staged in the shared database
# (invariant 11). Used and expired uploads do not count.
MAX_PENDING_UPLOADS = 10


class TooManyPendingUploads(Conflict):
    code = "TOO_MANY_PENDING_UPLOADS"


@dataclass(frozen=True)
class Upload:
    id: UUID
    size: int
    version: str
    created_at: datetime
    expires_at: datetime


class Lines:
    """Positions are the lines of a streamed body (1-based)."""

    def name(self, position: int) -> str:
        return f"line {position}"

    def error(self, position: int, field: str, message: str) -> InvalidInput:
        return InvalidLine(position, field, message)


class Items:
    """Positions are the items of a Python iterable, counted from 1."""

    def name(self, position: int) -> str:
        return f"audience[{position - 1}]"

    def error(self, position: int, field: str, message: str) -> InvalidInput:
        return InvalidInput(f"{self.name(position)}.{field}", message)


Positions = Lines | Items


def items(audience: Iterable[object]) -> Iterator[tuple[int, AudienceMember]]:
    """A library caller's iterable, validated lazily, member by member."""
    for index, item in enumerate(audience):
        yield index + 1, parse_member(item, f"audience[{index}]")


def stage(
    conn: Conn,
    tenant: str,
    members: Iterable[tuple[int, AudienceMember]],
    vault: Vault,
    now: datetime,
    actor: str,
    positions: Positions,
    ttl: timedelta = UPLOAD_TTL,
) -> Upload:
    """Stage (position, member) pairs, positions increasing, as a new upload."""
    staging = begin(conn, tenant, vault, now, actor, positions, ttl)
    for chunk in _chunks(iter(members)):
        staging.add(conn, chunk)
    return staging.finish(conn)


def begin(
    conn: Conn,
    tenant: str,
    vault: Vault,
    now: datetime,
    actor: str,
    positions: Positions,
    ttl: timedelta = UPLOAD_TTL,
) -> Staging:
    """A new upload, unsettled (no job can use it) until `Staging.finish`.

    Refused past `MAX_PENDING_UPLOADS`. Two uploads begun at the same moment
    may both pass the count: the overshoot is at most the uploads in flight
    (TIDINGS_UPLOADS_PER_TENANT per API process)."""
    if audience_uploads.pending_count(conn, tenant, now) >= MAX_PENDING_UPLOADS:
        raise TooManyPendingUploads(
            f"tenant {tenant!r} holds {MAX_PENDING_UPLOADS} unused uploads; create jobs from"
            " them or let them expire first"
        )
    upload_id = uuid7(now)
    audience_uploads.insert(conn, tenant, upload_id, actor, now, now + ttl)
    return Staging(tenant, upload_id, vault, positions)


class Staging:
    """An upload filled chunk by chunk.

    Each `add` may run in a transaction of its own: the HTTP route commits
    every chunk so that it holds no connection while the client is slow to
    send the next. Until `finish` settles its version the upload is not
    usable (`lock` skips it), and one abandoned halfway expires with the rest.
    """

    def __init__(self, tenant: str, upload_id: UUID, vault: Vault, positions: Positions) -> None:
        self.tenant, self.id = tenant, upload_id
        self.vault, self.positions = vault, positions
        self.size = 0
        self._digest = hashlib.sha256()

    def add(self, conn: Conn, chunk: Iterable[tuple[int, AudienceMember]]) -> None:
        rows = []
        for position, member in chunk:
            self.size += 1
            if self.size > MAX_AUDIENCE:
                raise self.positions.error(
                    position, "audience", f"at most {MAX_AUDIENCE} recipients"
                )
            row = _member_row(member, self.vault)
            self._digest.update(_canonical(row))
            rows.append((self.tenant, self.id, position, *row))
        if rows:
            _copy(conn, rows)

    def finish(self, conn: Conn) -> Upload:
        if self.size == 0:
            raise InvalidInput("audience", "at least one recipient is required")
        duplicate = audience_uploads.duplicate(conn, self.tenant, self.id)
        if duplicate is not None:
            first = self.positions.name(duplicate["first"])
            raise self.positions.error(
                duplicate["again"], "ref", f"the recipient ref appears twice (first at {first})"
            )
        version = f"sha256:{self._digest.hexdigest()[:32]}"
        settled = audience_uploads.settle(conn, self.tenant, self.id, self.size, version)
        assert settled is not None
        return Upload(**settled)


def lock(conn: Conn, tenant: str, upload_id: UUID, now: datetime) -> dict[str, Any] | None:
    """The upload, locked for this transaction; None if unknown or expired."""
    return audience_uploads.lock(conn, tenant, upload_id, now)


def freeze_into(conn: Conn, tenant: str, upload_id: UUID, job_id: UUID, now: datetime) -> None:
    """Copy the members into the job's frozen audience and consume the upload."""
    ledger.store_upload_destinations(conn, tenant, upload_id, job_id, now)
    jobs.freeze_upload_recipients(conn, tenant, upload_id, job_id, now)
    audience_uploads.consume(conn, tenant, upload_id, job_id, now)


def discard(conn: Conn, tenant: str, upload_id: UUID) -> None:
    audience_uploads.discard(conn, tenant, upload_id)


def _chunks(
    members: Iterator[tuple[int, AudienceMember]],
) -> Iterator[list[tuple[int, AudienceMember]]]:
    while chunk := list(islice(members, CHUNK_ROWS)):
        yield chunk


def _member_row(member: AudienceMember, vault: Vault) -> tuple[Any, ...]:
    # The columns of copy_audience_upload_members after tenant, upload and seq.
    phone, email = member.phone, member.email
    return (
        member.ref,
        vault.reference("sms", phone) if phone else None,
        vault.encrypt(phone) if phone else None,
        member.phone_country,
        vault.reference("email", email) if email else None,
        vault.encrypt(email) if email else None,
        member.timezone,
        member.locale,
        list(member.preferences),
        dict(member.variables),
    )


def _canonical(row: tuple[Any, ...]) -> bytes:
    ref, phone_hash, _, country, email_hash, _, tz, locale, prefs, variables = row
    # Ciphertexts are left out: encryption is randomized, so they would make
    # the same audience hash differently on every upload.
    described = [ref, phone_hash, email_hash, country, tz, locale, prefs, variables]
    return json.dumps(described, sort_keys=True, default=str).encode() + b"\n"


def _copy(conn: Conn, rows: list[tuple[Any, ...]]) -> None:
    audience_uploads.copy_members(conn, ((*row[:-1], Jsonb(row[-1])) for row in rows))
