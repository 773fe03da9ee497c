"""The claim-time gate: may this intent start an attempt now?

Runs inside the claim transaction, before any network work: the deadline,
shadow mode and the policy (under the version frozen on the intent) are
checked against committed state. What it returns is a verdict the claim
applies as one transition (domain/claiming.py says which).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain import policy as rules
from tidings.domain.claiming import ClaimVerdict, claim_verdict, deadline_passed
from tidings.domain.decision_codes import DecisionCode
from tidings.domain.decision_inputs import decision_inputs
from tidings.domain.intent import Intent
from tidings.domain.policy import Decision, PolicyRequest
from tidings.domain.policy_document import Policy
from tidings.store import policies

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class GateResult:
    verdict: ClaimVerdict
    decision: Decision
    policy: Policy | None  # None: the tenant has published none (POLICY_MISSING)
    # What the policy read besides its version (domain/decision_inputs.py);
    # None when no rule was consulted (no policy, or past the deadline).
    inputs: dict[str, Any] | None = None


# Supplies what the policy needs to know about the recipient (consent,
# opt-out, suppression, recent sends). The contacts store plugs in here.
RecipientFacts = Callable[[Conn, Intent, Policy, datetime, Mapping[str, Any]], PolicyRequest]


def bare_facts(
    conn: Conn, intent: Intent, policy: Policy, now: datetime, row: Mapping[str, Any]
) -> PolicyRequest:
    """Facts when no contact record exists: no consent, not opted out."""
    return PolicyRequest(
        channel=intent.channel,
        purpose=intent.purpose,
        event_class=intent.event_class,
        country=intent.country,
        timezone=intent.timezone,
        consents=(),
        opted_out=False,
        suppressed=False,
        now=now,
        expires_at=intent.expires_at,
    )


def decide(
    conn: Conn,
    intent: Intent,
    now: datetime,
    *,
    shadow: bool,
    facts: RecipientFacts = bare_facts,
    row: Mapping[str, Any] | None = None,
) -> GateResult:
    policy = frozen_policy(conn, intent)
    inputs = None
    if policy is None:
        decision = rules.policy_missing()
    elif deadline_passed(intent.expires_at, now):  # no rule needs consulting
        decision = Decision(False, DecisionCode.EXPIRED, policy.version)
    else:
        request = facts(conn, intent, policy, now, row or {})
        decision = rules.evaluate(policy, request)
        inputs = decision_inputs(policy, request)
    verdict = claim_verdict(decision, now=now, expires_at=intent.expires_at, shadow=shadow)
    return GateResult(verdict, decision, policy, inputs)


def sent_policy(conn: Conn, intent: Intent) -> Policy:
    """The policy of an intent that has had an attempt: one always exists,
    since an attempt starts only on a decision some policy allowed."""
    policy = frozen_policy(conn, intent)
    if policy is None:
        raise LookupError(f"intent {intent.id} has an attempt but no policy")
    return policy


def frozen_policy(conn: Conn, intent: Intent) -> Policy | None:
    """The version frozen on the intent; one created before its tenant had
    a policy takes the current one, if there is one now."""
    if intent.policy_version is None:
        return policies.current(conn, intent.tenant_id)
    return policies.by_version(conn, intent.tenant_id, intent.policy_version)
