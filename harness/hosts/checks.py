"""What a many-hosts run must show (harness/hosts/run.py): each check
returns "" when it holds, else what it saw. The bounded test asserts each
one; the long run (`python -m harness.reliability --hosts`) reports them."""

from __future__ import annotations

import math
from collections.abc import Callable

from .run import CUT, HostsResult


def every_intent_final(r: HostsResult) -> str:
    c = r.config
    total = c.recipients + len(r.stream_ids) + c.held + c.limited
    total += r.figures.get("burst_created", 0)
    if not set(r.states) <= {"delivered", "canceled"}:
        return f"not all delivered or canceled: {dict(r.states)}"
    if sum(r.states.values()) != total:
        return f"{sum(r.states.values())} intents, {total} created"
    if r.stream_errors:
        return f"{len(r.stream_errors)} API calls failed: {r.stream_errors[:3]}"
    return ""


def nothing_sent_twice(r: HostsResult) -> str:
    twice = {k: n for k, n in r.sends_per_key.items() if n > 1}
    if twice:
        return f"{len(twice)} attempt keys sent more than once"
    again = {i: n for i, n in r.sends_per_intent.items() if n > 1}
    if again:
        return f"{len(again)} intents sent more than once"
    lost = r.delivered - set(r.sends_per_intent)
    if lost:
        return f"{len(lost)} delivered intents the provider never received"
    # A cancel may win after its call (the intent stays canceled): only
    # those may have been sent without being delivered.
    extra = set(r.sends_per_intent) - r.delivered
    if len(extra) > r.states["canceled"]:
        return f"{len(extra)} sent but not delivered, {r.states['canceled']} canceled"
    return ""


def job_counts_equal_audience(r: HostsResult) -> str:
    job, size = r.job, r.config.recipients
    counts = job["counts"]
    if job["audience_size"] != size or sum(counts.values()) != size:
        return f"audience {job['audience_size']}, counts {counts}, wanted {size}"
    if job["status"] != "complete" or counts.get("delivered") != size:
        return f"job {job['status']}: {counts}"
    return ""


def cut_host_replaced(r: HostsResult) -> str:
    before, after = r.sent_by_host["before_cut"], r.sent_by_host["after_pause"]
    idle = {"worker-1", "worker-2", "worker-3"} - {h for h, n in before.items() if n}
    if idle:
        return f"before the cut {sorted(idle)} sent nothing: {dict(before)}"
    if not after.get("worker-4") or after.get(CUT):
        return f"after the pause: {dict(after)}"
    if r.lease_recoveries == 0:
        return "the cut host left no lease to recover: the cut proved nothing"
    if r.cut_host_connections_left:
        return f"{r.cut_host_connections_left} server connections of the cut host remain"
    return ""


def kill_switch_holds_every_host(r: HostsResult) -> str:
    if r.held_sent_while_on:
        return f"{r.held_sent_while_on} held intents sent while the switch was on"
    if r.held_sent_after != r.config.held:
        return f"{r.held_sent_after} of {r.config.held} sent once the switch was off"
    return ""


def rate_limit_holds_across_hosts(r: HostsResult) -> str:
    c, times = r.config, r.limited_times
    if len(times) != c.limited:
        return f"{len(times)} of {c.limited} limited intents sent"
    window = c.rate_window_s
    # Fixed windows admit up to twice the limit around a boundary, no more;
    # sends that need W windows have their first and last at least W - 2
    # whole windows apart (a second off for the way from claim to provider).
    busiest = max(sum(1 for t in times[i:] if t < start + window) for i, start in enumerate(times))
    if busiest > 2 * c.rate_limit:
        return f"{busiest} sends within {window} s, limit {c.rate_limit}"
    needed = (math.ceil(c.limited / c.rate_limit) - 2) * window - 1
    if times[-1] - times[0] < needed:
        return f"all sent within {times[-1] - times[0]:.1f} s, at least {needed} s needed"
    return ""


def provider_pause_holds_every_host(r: HostsResult) -> str:
    ready = r.added_ready_at - r.pause_start
    if ready > r.config.retry_after_s - 2:
        return f"the added host was ready {ready:.1f} s into the pause: too late to show it"
    if r.calls_during_pause:
        return f"{r.calls_during_pause} calls while the provider account was paused"
    return ""


def console_session_crosses_api_hosts(r: HostsResult) -> str:
    return "" if r.session_crossed else "a session from API host 1 was refused by API host 2"


CHECKS: dict[str, Callable[[HostsResult], str]] = {
    f.__name__: f
    for f in (
        every_intent_final,
        nothing_sent_twice,
        job_counts_equal_audience,
        cut_host_replaced,
        kill_switch_holds_every_host,
        rate_limit_holds_across_hosts,
        provider_pause_holds_every_host,
        console_session_crosses_api_hosts,
    )
}


def problems(r: HostsResult) -> dict[str, str]:
    return {name: check(r) for name, check in CHECKS.items()}
