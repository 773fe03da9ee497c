"""Seed 002: "use a Unicode SMS fixture and inspect its segmentation
behaviour", through the whole pipeline: created, rendered, counted as
UCS-2, carried intact to the provider, and spent by its segment count
(R002.11, docs/requirements.md)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from tidings import IntentState, ManualClock, Tidings
from tidings.policies import builtin_document

from .dispatch_helpers import Listening, worker

# Cyrillic and an emoji: outside GSM-7, so the whole text travels as UCS-2.
BODY = "Место в {{ class_name }} 🎉 до {{ deadline }}"
FIXED_UNITS = len("Место в  🎉 до ") + 1  # the emoji is a surrogate pair: two units
DEADLINE = "18:00"


def class_name(units: int) -> str:
    """A class name that makes the rendered text exactly `units` long."""
    return "Й" * (units - FIXED_UNITS - len(DEADLINE))


def unicode_offer(t: Tidings, n: int, units: int) -> Any:
    return t.notify(
        idempotency_key=f"waitlist:772:{n}:offer:1",
        channel="sms",
        recipient={"ref": f"member-{n}", "phone": "+14155550123"},
        template="waitlist_offer_ru",
        variables={"class_name": class_name(units), "deadline": DEADLINE},
        purpose="transactional",
        event_class="waitlist_offer",
        expires_at=t.clock.now() + timedelta(days=3),
    )


def spend_policy(segments: int) -> dict[str, Any]:
    doc = copy.deepcopy(builtin_document("default"))
    limits = {"sms": {"US": {"segments": segments, "per_seconds": 86400}}}
    doc.update(version="spend-ucs2", country_spend_limits=limits)
    return doc


def test_a_unicode_sms_is_counted_sent_intact_and_spent_as_ucs2(
    tidings: Tidings, clock: ManualClock
) -> None:
    # 1 + 2 + 2 segments fit a budget of 5; the last 2-segment text does not.
    # Counted as GSM-7 (160 a segment) all four would be one each and fit.
    tidings.publish_policy(spend_policy(5))
    tidings.publish_template(
        "waitlist_offer_ru",
        channel="sms",
        body=BODY,
        required_variables=["class_name", "deadline"],
    )
    core = Listening(clock)
    units = {1: 70, 2: 71, 3: 134, 4: 100}  # 70 is one segment, 71 two, 134 = 2 x 67
    intents = {n: unicode_offer(tidings, n, u) for n, u in units.items()}
    worker(tidings, core).dispatch_once()

    sent = {r["idempotency_key"]: r for r in core.received}
    assert len(sent) == 3
    got = {n: tidings.get(i.id) for n, i in intents.items()}
    waiting = [n for n, g in got.items() if g.state is IntentState.PENDING]
    assert len(waiting) == 1 and got[waiting[0]].decision_code == "SPEND_LIMIT"
    assert waiting[0] != 1  # the one-segment text always fits
    for n, g in got.items():
        if n in waiting:
            continue
        assert g.state is IntentState.ACCEPTED
        [attempt] = g.attempts
        assert attempt.encoding == "UCS-2"
        assert attempt.segments == (1 if units[n] <= 70 else 2)
        text = sent[attempt.attempt_key]["body"]
        expected = BODY.replace("{{ class_name }}", class_name(units[n]))
        assert text == expected.replace("{{ deadline }}", DEADLINE)  # intact, emoji and all
        assert len(text.encode("utf-16-le")) // 2 == units[n]
    with tidings.db.transaction() as conn:
        spent = conn.execute(
            "SELECT sum(used) AS n FROM rate_counters WHERE scope = 'country_spend'"
        ).fetchone()
    assert spent is not None and spent["n"] == 5  # the budget, spent in UCS-2 segments
