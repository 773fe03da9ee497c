"""The client's bulk jobs: audiences, jobs, their progress, and reports."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

import psycopg

from tidings.client.base import ClientBase, Recorded, as_uuid
from tidings.client.uploads import UploadStaging
from tidings.jobs.freeze import create_job
from tidings.jobs.prepare import prepare_next
from tidings.jobs.request import parse_job
from tidings.jobs.status import job_recipients, job_status
from tidings.jobs.uploads import Items, Lines, Upload
from tidings.jobs.uploads import begin as begin_staging
from tidings.jobs.uploads import items as upload_items
from tidings.jobs.uploads import stage as stage_upload
from tidings.providers.template_ids import required_template_ids
from tidings.store import reports


class JobMethods(ClientBase):
    def create_job(
        self, *, conn: psycopg.Connection[Any] | None = None, actor: str = "library", **request: Any
    ) -> dict[str, Any]:
        """Record a bulk job and freeze its audience; workers prepare and send it.

        `audience` is a list of recipients, or any other iterable (a
        generator over your database, say): that is staged in chunks as it
        is consumed, never held whole. Or give `audience_upload=` the id of
        an uploaded audience (`upload_audience`) instead.
        """
        return self.record_job(conn=conn, actor=actor, **request).item

    def record_job(
        self, *, conn: psycopg.Connection[Any] | None = None, actor: str = "library", **request: Any
    ) -> Recorded[dict[str, Any]]:
        """`create_job`, saying whether this call created the job (`False`:
        the key was replayed, and `item` is the first job)."""
        parsed = parse_job(request)
        self._ensure_tenant()
        with self.db.transaction(conn) as tx:
            job, created = create_job(
                tx, self.tenant, parsed, self.vault, self.clock.now(), actor, self.template_ids()
            )
        return Recorded(job, created)

    def template_ids(self) -> dict[str, tuple[str, ...]]:
        """Channel -> the configured providers that need a provider-side
        template id (providers/template_ids.py); read at each call, as the
        workers read their providers."""
        return required_template_ids(self.settings.simulator_url)

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

    def begin_upload(self, *, actor: str = "library") -> UploadStaging:
        """Start staging an audience that arrives in batches (a streamed
        body, say), each written in a transaction of its own: see
        `UploadStaging`. `upload_audience` is the same for an iterable."""
        self._ensure_tenant()
        with self.db.transaction() as conn:
            staging = begin_staging(conn, self.tenant, self.vault, self.clock.now(), actor, Lines())
        return UploadStaging(self.db, self.tenant, staging)

    def prepare_jobs(self) -> int:
        """Resolve channels and create intents for waiting jobs (workers do this too)."""
        done = 0
        while prepare_next(self.db, self.clock.now()) is not None:
            done += 1
        return done

    def job(self, job_id: UUID | str) -> dict[str, Any]:
        with self.db.transaction() as conn:
            return job_status(conn, self.tenant, as_uuid(job_id), self.clock.now())

    def job_recipients(
        self, job_id: UUID | str, *, after: int = 0, limit: int = 100
    ) -> dict[str, Any]:
        with self.db.transaction() as conn:
            return job_recipients(conn, self.tenant, as_uuid(job_id), after, limit)

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
            reports.register(
                conn,
                self.tenant,
                report_id,
                revision,
                filename=filename,
                content_type=content_type,
                location=location,
                size_bytes=size_bytes,
                now=self.clock.now(),
            )
