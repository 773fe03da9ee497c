"""What every boundary log line of one intent carries (R002.10).

Seed 002: "log the report ID, immutable template revision, notification
intent ID, channel, and provider identifier at each boundary": at its
claim, its provider call, the answer, the record of it and each status
observation applied, one grep of the intent id or the report id follows
it end to end. Never the destination or the rendered body.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from tidings.domain.intent import Intent
from tidings.platform.logging import job_context, log_context


def intent_context(
    intent: Intent, *, provider: str, attempt_key: str | None = None
) -> AbstractContextManager[None]:
    """Bind the intent's boundary fields for a `with` block."""
    return log_context(
        tenant_id=intent.tenant_id,
        intent_id=str(intent.id),
        correlation_id=intent.correlation_id,
        channel=intent.channel,
        template_revision=f"{intent.template_name}@{intent.template_revision}",
        attempt_key=attempt_key,
        provider=provider,
        **job_context(intent.job_id, intent.report_id, intent.report_revision),
    )
