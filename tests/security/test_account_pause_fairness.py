"""One tenant's 429s cannot hold a shared provider account for everyone
(issue #39, finding 5).

A provider account carries every tenant's messages, so a 429 pauses it for
every worker. Without a Retry-After the pause is our own guess, and it grew
exponentially with the answers in a row: a tenant whose traffic drew 429
after 429 paused the account for minutes, and another tenant's single SMS
waited 54 s, then 118 s. Now the back-off grows per (account, tenant): the
tenant whose traffic draws the 429s is held back exponentially, everyone
else sees at most `SHARED_MAX_SECONDS` per answer (docs/providers.md, "A
provider that says back off"). The pause names whose traffic caused it.
"""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import publish_example_policy
from tests.integration.dispatch_helpers import (
    offer,
    publish_offer_template,
    sends,
    simulator,
    worker,
)
from tests.integration.observability_helpers import evaluate_alerts, render_metrics
from tidings import IntentState, ManualClock, Tidings
from tidings.domain.breaker import SHARED_MAX_SECONDS
from tidings.observability.alerts.config import AlertConfig

THROTTLED = "+14155550429"  # the simulator's magic number: always a 429
PAUSED = re.compile(r"^tidings_provider_paused_seconds\{([^}]*)\} (\S+)$", re.M)
HELD = re.compile(r"^tidings_provider_tenant_held_seconds\{([^}]*)\} (\S+)$", re.M)


def tenant(t: Tidings, name: str) -> Tidings:
    view = t.for_tenant(name)
    publish_example_policy(t, name)
    publish_offer_template(view)
    return view


def sms(t: Tidings, n: int, phone: str) -> Any:
    return offer(t, n, recipient={"ref": f"m{n}", "phone": phone}, expires_at=None)


def test_a_noisy_tenants_429s_hold_a_quiet_tenant_for_a_bounded_time(
    tidings: Tidings, clock: ManualClock
) -> None:
    noisy, quiet = tenant(tidings, "noisy"), tenant(tidings, "quiet")
    # Retry-After: 0, as good as none (Twilio's 20429 promises none): the
    # pause is our own exponential guess, the case that grew without bound.
    core = simulator(clock, retry_after_seconds=0)
    w = worker(tidings, core)
    for second in range(600):  # ten minutes of noisy traffic, all of it 429s
        sms(noisy, second, THROTTLED)
        w.dispatch_once("sms")
        clock.advance(1)
    assert sum(e["outcome"] == "rate_limited" for e in sends(core)) >= 10
    waited = 0
    single = sms(quiet, 1, "+14155550123")
    while quiet.get(single.id).state is not IntentState.ACCEPTED:
        sms(noisy, 1000 + waited, THROTTLED)  # the noise goes on meanwhile
        w.dispatch_once("sms")
        assert waited <= SHARED_MAX_SECONDS, f"the quiet tenant waited {waited} s"
        clock.advance(1)
        waited += 1


def test_the_pause_names_whose_traffic_caused_it(tidings: Tidings, clock: ManualClock) -> None:
    noisy, quiet = tenant(tidings, "noisy"), tenant(tidings, "quiet")
    core = simulator(clock, retry_after_seconds=0)
    w = worker(tidings, core)
    held = sms(quiet, 1, "+14155550123")
    claimed = w.claim("sms", 10)  # the quiet tenant's SMS, claimed before the pause
    for n in range(3):
        sms(noisy, n, THROTTLED)
    assert w.dispatch_once("sms") == 3  # three 429s in a row, all the noisy tenant's
    w.record([w.send(c) for c in claimed])  # handed back unsent: the account is paused
    assert quiet.get(held.id).state is IntentState.PENDING
    metrics = render_metrics(tidings.runtime)[0].decode()
    [(labels, seconds)] = PAUSED.findall(metrics)
    assert 'caused_by="noisy"' in labels and 0 < float(seconds) <= SHARED_MAX_SECONDS
    [(held_labels, _)] = HELD.findall(metrics)  # the noisy tenant's own hold, alone
    assert 'tenant="noisy"' in held_labels
    found = {
        a.tenant_id: a
        for a in evaluate_alerts(tidings.db, clock.now(), AlertConfig())
        if a.key == "provider_paused:simulator"
    }
    assert found["noisy"].details["caused_by"] == "this tenant's traffic"
    assert found["noisy"].details["tenant_held_until"] is not None
    theirs = found["quiet"]
    assert theirs.details["caused_by"] == "another tenant's traffic"
    assert theirs.details["tenant_held_until"] is None
    assert "noisy" not in repr(theirs)  # a tenant never learns another's name
