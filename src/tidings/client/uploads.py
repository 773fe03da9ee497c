"""An audience staged in batches as it arrives (`Tidings.begin_upload`).

Each batch is written in a transaction of its own, so a slow sender holds
no connection between batches; `finish` makes the upload usable by one job
(`create_job(audience_upload=...)`), `discard` drops what was staged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from tidings.domain.errors import InvalidInput, InvalidLine
from tidings.jobs.request import AudienceMember, parse_member
from tidings.jobs.uploads import CHUNK_ROWS, Staging, Upload, discard
from tidings.store.database import Database

__all__ = ["Upload", "UploadStaging", "member_problems"]

# The fields `member_problems` checks one by one, in the order it names them.
CHECKED = ("phone", "email", "timezone", "locale", "preferences", "variables")


class UploadStaging:
    """One upload being staged; made by `Tidings.begin_upload`."""

    # Batches of about this many members are written as one chunk.
    BATCH_ROWS = CHUNK_ROWS

    def __init__(self, db: Database, tenant: str, staging: Staging) -> None:
        self._db = db
        self._tenant = tenant
        self._staging = staging

    @property
    def id(self) -> UUID:
        return self._staging.id

    def add(self, lines: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
        """Stage numbered recipients (the fields of a job's audience member),
        read in order; the first bad one raises `InvalidLine` naming its
        number, and nothing of the batch is written."""
        members = [(number, _member(number, item)) for number, item in lines]
        with self._db.transaction() as conn:
            self._staging.add(conn, members)

    def finish(self) -> Upload:
        with self._db.transaction() as conn:
            return self._staging.finish(conn)

    def discard(self) -> None:
        """Drop everything staged so far (safe to call after any failure)."""
        with self._db.transaction() as conn:
            discard(conn, self._tenant, self._staging.id)


def _member(number: int, item: Mapping[str, Any]) -> AudienceMember:
    try:
        return parse_member(dict(item))
    except InvalidInput as exc:
        raise InvalidLine(number, exc.field, exc.message) from None


def member_problems(item: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for every field of one recipient that `add` would
    refuse, so a caller can name them all (a CSV row's bad cells) rather
    than the first; empty when the recipient is fine."""
    try:
        parse_member(dict(item))
    except InvalidInput as first:
        return _each(item) or [(first.field, first.message)]
    return []


def _each(item: Mapping[str, Any]) -> list[tuple[str, str]]:
    found = []
    for field in CHECKED:
        if field in item:
            try:
                parse_member({"ref": item.get("ref") or "-", field: item[field]})
            except InvalidInput as exc:
                found.append((exc.field, exc.message))
    return found
