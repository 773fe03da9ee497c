"""The counters one message consumes under a policy (domain/limits.py says
how a counter is checked)."""

from __future__ import annotations

from tidings.domain.limits import SPEND_SCOPE, LimitKey, RateLimitRule
from tidings.domain.policy_document import Policy


def limit_keys(
    policy: Policy,
    *,
    channel: str,
    recipient_ref: str,
    destination_hash: str,
    job_id: str | None,
    event_class: str,
    tenant: str,
    country: str | None,
    provider_account: str | None,
    segments: int = 1,
) -> list[LimitKey]:
    """Every counter one message consumes: rate limits cost 1, spend costs
    its SMS segments. A rule whose scope has no value (no job, unknown
    country) has nothing to count against and is skipped."""
    values: dict[str, str | None] = {
        "recipient": recipient_ref,
        "destination": destination_hash,
        "job": job_id,
        "event_class": event_class,
        "tenant": tenant,
        "country": country,
        "provider_account": provider_account,
    }
    keys = [_rate_key(rule, channel, values[rule.scope]) for rule in policy.rate_limits]
    keys.append(spend_key(policy, channel, country, segments))
    return [k for k in keys if k is not None]


def _rate_key(rule: RateLimitRule, channel: str, value: str | None) -> LimitKey | None:
    if value is None or rule.channel not in (None, channel):
        return None
    key = f"{rule.scope}:{rule.channel or '*'}:{rule.per_seconds}s:{value}"
    return LimitKey(rule.scope, key, rule.limit, rule.per_seconds, 1)


def spend_key(policy: Policy, channel: str, country: str | None, segments: int) -> LimitKey | None:
    spend = policy.country_spend_limits.get(channel, {}).get(country or "")
    if spend is None:
        return None
    key = f"{SPEND_SCOPE}:{channel}:{spend.per_seconds}s:{country}"
    return LimitKey(SPEND_SCOPE, key, spend.segments, spend.per_seconds, segments)
