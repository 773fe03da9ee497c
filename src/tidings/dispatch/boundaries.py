"""What every boundary log line of one intent carries (R002.10).

Seed 002: "log the report ID, immutable template revision, notification
intent ID, channel, and provider identifier at each boundary": at its
claim, its provider call, the answer, the record of it and each status
observation applied, one grep of the intent id or the report id follows
it end to end. Never the destination or the rendered body.

The same boundaries are OpenTelemetry spans when tracing is on
(platform/tracing.py, docs/tracing.md), with the same fields as
attributes; while it is off, nothing here builds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from tidings.dispatch.claim import Claimed, ClaimRequest
from tidings.domain.intent import Attempt, Intent
from tidings.platform import tracing
from tidings.platform.logging import job_context, log_context
from tidings.providers.outcomes import Accepted, Observation, SendResult


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


def claim_attributes(claimed: Claimed) -> dict[str, Any]:
    return {
        **tracing.intent_attributes(claimed.intent),
        "provider": claimed.provider,
        "attempt": claimed.n,
        "attempt_key": claimed.attempt_key,
    }


def claim_spans(
    request: ClaimRequest, claimed: Sequence[Claimed], start_ns: int, end_ns: int
) -> None:
    """A `dispatch.claim` span for a batch that claimed any, with one
    `intent.claim` span per intent in it (an empty claim is no span: an
    idle worker claims every second)."""
    if not claimed or not tracing.enabled():
        return
    tracing.batch_between(
        "dispatch.claim",
        {
            "channel": request.channel,
            "provider": request.provider,
            "batch_size": request.limit,
            "claimed": len(claimed),
        },
        "intent.claim",
        map(claim_attributes, claimed),
        start_ns,
        end_ns,
    )


def call_span(claimed: Claimed) -> tracing.NoSpan:
    """The `provider.call` span around one adapter send."""
    if not tracing.enabled():
        return tracing.NO_SPAN
    return tracing.span("provider.call", **claim_attributes(claimed))


def note_answer(span: tracing.NoSpan, result: SendResult) -> None:
    """The provider's answer on its call's span: anything but an acceptance
    is an error status, with its normalized code."""
    if not span:
        return
    code = getattr(getattr(result, "code", None), "value", None)
    span.set(
        outcome=type(result).__name__.lower(),
        code=code,
        provider_message_id=getattr(result, "provider_message_id", None),
    )
    if not isinstance(result, Accepted):
        span.fail(code or type(result).__name__)


def receipt_span(obs: Observation, source: str) -> tracing.NoSpan:
    """The `receipt.apply` span around one observation applied."""
    if not tracing.enabled():
        return tracing.NO_SPAN
    return tracing.span(
        "receipt.apply",
        provider=obs.provider,
        provider_message_id=obs.provider_message_id,
        status=obs.status.value,
        code=obs.code,
        source=source,
    )


def note_receipt(span: tracing.NoSpan, attempt: Attempt | None, effect: str) -> None:
    """What applying it did, and whose attempt it was (unmatched: none)."""
    if not span:
        return
    span.set(effect=effect)
    if attempt is not None:
        span.set(
            intent_id=attempt.intent_id,
            tenant_id=attempt.tenant_id,
            channel=attempt.channel,
            attempt=attempt.n,
            attempt_key=attempt.attempt_key,
        )
