"""What a decision read besides the policy version.

Values are never null (the transition's input drops nulls): an absence
is said, as `found: false` or `source: "unknown"`.

Seed 000 asks every decision to answer "which input was evaluated, which
immutable policy version": the consent evidence (or its absence), the time
zone the send window was judged in, the frequency-cap counts and the
block flags. `decision_inputs` turns the request `evaluate` saw into that
record, as JSON-ready values, so the audit shows the inputs rather than
asking a reader to reconstruct them from tables that have moved on since.
"""

from __future__ import annotations

from typing import Any

from tidings.domain.policy import PolicyRequest, consent_used
from tidings.domain.policy_document import Policy


def decision_inputs(policy: Policy, request: PolicyRequest) -> dict[str, Any]:
    return {
        "consent": _consent(policy, request),
        "timezone": _timezone(request),
        "country": request.country,
        "frequency_caps": {cap: usage.count for cap, usage in request.recent_sends.items()},
        "blocks": _blocks(request),
    }


def _blocks(request: PolicyRequest) -> dict[str, Any]:
    blocks: dict[str, Any] = {"opted_out": request.opted_out, "suppressed": request.suppressed}
    if request.suppressed and request.suppression_reason:
        blocks["suppression_reason"] = request.suppression_reason
    return blocks


def _consent(policy: Policy, request: PolicyRequest) -> dict[str, Any]:
    purpose = policy.purposes.get(request.purpose)
    rule = purpose.consent.get(request.channel) if purpose is not None else None
    required = rule is not None and rule.requires_consent(request.country)
    used = consent_used(request)
    if used is None:
        return {"required": required, "found": False}
    return {
        "required": required,
        "found": True,
        "evidence_id": used.evidence_id,
        "evidence_ref": used.evidence_ref,
        "captured_at": used.captured_at.isoformat(),
    }


def _timezone(request: PolicyRequest) -> dict[str, Any]:
    if request.timezone is not None:
        return {"zone": request.timezone, "source": request.timezone_source or "recipient"}
    if request.fallback_timezones:
        # Read from the number: a send window must be open in all of them.
        return {"source": "number", "candidates": list(request.fallback_timezones)}
    return {"source": "unknown"}
