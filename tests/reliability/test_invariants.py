"""Each invariant check catches the violation it exists for: a checker that
cannot fail would make every reliability run pass."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from harness.reliability import invariants as inv

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
ID = uuid.UUID("01a22900-0000-7000-8000-000000000001")
ID2 = uuid.UUID("01a22900-0000-7000-8000-000000000002")
KEY1, KEY2 = "k:attempt:1", "k:attempt:2"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def transition(version: int, src: str | None, event: str, dst: str, when: float, **kw: Any) -> Any:
    row = {"intent_id": ID, "version": version, "from_state": src, "event": event}
    row.update(to_state=dst, at=at(when), decision_code=None, attempt=None)
    return {**row, **kw}


def delivered_once() -> inv.Snapshot:
    """One intent, sent once, delivered: every check holds."""
    return inv.Snapshot(
        now=at(100),
        intents=[
            {
                "id": ID,
                "state": "delivered",
                "version": 4,
                "expires_at": at(60),
                "resend_budget": 1,
                "attempt_count": 1,
                "next_due_at": None,
                "lease_owner": None,
                "lease_expires_at": None,
                "job_id": None,
            }
        ],
        attempts=[attempt(1, KEY1, "delivered")],
        transitions=[
            transition(1, None, "create", "pending", 0),
            transition(2, "pending", "claim", "sending", 1, attempt="1"),
            transition(3, "sending", "provider_accepted", "accepted", 2),
            transition(4, "accepted", "delivered", "delivered", 3),
        ],
        observations=[{"dedupe_key": "simulator:event:E1", "source": "webhook"}],
        ledger_before=[send(KEY1, 1.5)],
        ledger_after=[send(KEY1, 1.5)],
        receipts=[{"event_id": "E1", "status": "delivered", "state": "delivered"}],
        job_counts={"j": ({"delivered": 1}, {"delivered": 1})},
        metric_counts=({"delivered": 1}, {"delivered": 1}),
    )


def attempt(n: int, key: str, state: str, code: str | None = None) -> dict[str, Any]:
    return {
        "intent_id": ID,
        "n": n,
        "attempt_key": key,
        "state": state,
        "code": code,
        "provider_message_id": f"SM{n}",
        "accepted_at": at(2) if state != "failed" else None,
        "next_check_at": None,
    }


def send(key: str, when: float, outcome: str = "accepted") -> dict[str, Any]:
    return {"idempotency_key": key, "received_at": at(when).isoformat(), "outcome": outcome}


def broken(s: inv.Snapshot) -> dict[str, list[str]]:
    return {name: found for name, found in inv.check_all(s).items() if found}


def test_a_clean_history_violates_nothing() -> None:
    assert broken(delivered_once()) == {}


def test_a_key_accepted_twice_is_caught() -> None:
    s = delivered_once()
    s.ledger_after.append(send(KEY1, 1.7, "timeout_after_accept"))
    assert "one_acceptance_per_attempt_key" in broken(s)


def test_a_send_without_a_claim_or_before_it_is_caught() -> None:
    s = delivered_once()
    s.ledger_before = [send(KEY1, 0.5), send("stray:attempt:1", 1.0)]
    found = broken(s)["every_send_had_a_committed_claim"]
    assert len(found) == 2


def test_a_claim_after_a_cancel_is_caught() -> None:
    s = delivered_once()
    s.transitions[1:] = [
        transition(2, "pending", "cancel", "canceled", 1),
        transition(3, "canceled", "claim", "sending", 2, attempt="1"),
    ]
    assert "no_claim_after_cancel" in broken(s)


def test_a_claim_at_the_deadline_and_an_unenforced_deadline_are_caught() -> None:
    s = delivered_once()
    s.intents[0]["expires_at"] = at(1)
    assert "no_claim_at_or_after_expiry" in broken(s)
    s = delivered_once()
    s.intents[0].update(state="accepted", version=3)
    s.transitions.pop()
    s.attempts[0].update(state="accepted", next_check_at=at(99))
    assert "no_claim_at_or_after_expiry" in broken(s)


def test_an_intent_stuck_without_a_check_is_caught() -> None:
    """The shape of a real finding: a receipt settled the attempt while the
    intent was `sending`; the intent then went to `reconciling` and nothing
    was ever scheduled to move it again."""
    s = delivered_once()
    s.intents[0].update(state="reconciling", version=3, expires_at=None)
    s.transitions[2:] = [transition(3, "sending", "outcome_unknown", "reconciling", 9)]
    assert "every_intent_accounted_for" in broken(s)


def test_a_state_the_audit_does_not_explain_is_caught() -> None:
    s = delivered_once()
    s.transitions[3] = transition(4, "accepted", "cancel", "delivered", 3)
    assert "every_intent_accounted_for" in broken(s)


def test_an_overdue_intent_is_caught() -> None:
    s = delivered_once()
    s.intents[0].update(state="pending", version=2, attempt_count=0, next_due_at=at(50))
    s.transitions[1:] = [transition(2, "pending", "defer", "pending", 1)]
    s.attempts, s.ledger_before, s.ledger_after = [], [], []
    assert "every_intent_accounted_for" in broken(s)


def test_a_resend_past_the_budget_is_caught() -> None:
    s = delivered_once()
    s.intents[0]["resend_budget"] = 0
    s.attempts = [attempt(1, KEY1, "undelivered"), attempt(2, KEY2, "delivered")]
    s.intents[0]["attempt_count"] = 2
    s.ledger_after.append(send(KEY2, 5))
    assert "resend_budget_respected" in broken(s)


def test_a_second_message_after_a_wrong_not_received_is_caught() -> None:
    s = delivered_once()
    s.attempts = [attempt(1, KEY1, "failed", "NOT_RECEIVED"), attempt(2, KEY2, "delivered")]
    s.ledger_after = [send(KEY1, 1.5), send(KEY2, 5)]
    found = broken(s)["no_unjustified_second_message"]
    assert len(found) == 2  # the resend itself, and the false "never received"


def test_projections_that_disagree_with_rows_are_caught() -> None:
    s = delivered_once()
    s.job_counts["j"] = ({"delivered": 2}, {"delivered": 1})
    s.metric_counts = ({"delivered": 1}, {"delivered": 1, "failed": 1})
    assert len(broken(s)["counts_derivable_from_rows"]) == 2


def test_a_lost_or_doubled_observation_is_caught() -> None:
    s = delivered_once()
    s.receipts.append({"event_id": "E2", "status": "sent", "state": "delivered"})
    s.observations.append({"dedupe_key": "simulator:event:E1", "source": "webhook"})
    assert len(broken(s)["no_observation_lost"]) == 2


def test_a_receipt_over_a_providers_wire_is_found_by_its_message_and_status() -> None:
    """Over Twilio's own wire the adapter keys an observation its way (no
    event id): the message and its status word find it; nothing else does."""
    s = delivered_once()
    s.wire = True
    s.observations.append(
        {
            "dedupe_key": "twilio:abc",
            "source": "webhook",
            "provider_message_id": "SM1",
            "raw_status": "sent",
        }
    )
    here = {"event_id": "E2", "message_id": "SM1", "status": "sent", "state": "delivered"}
    s.receipts.append({**here, "profile": "twilio"})
    assert "no_observation_lost" not in broken(s)
    s.receipts.append({**here, "event_id": "E3", "status": "delivered", "profile": "twilio"})
    s.receipts.append({**here, "event_id": "E4", "profile": "ideal"})  # not on a wire
    assert len(broken(s)["no_observation_lost"]) == 2
    s.wire = False
    assert len(broken(s)["no_observation_lost"]) == 3


def test_a_lost_receipt_the_api_never_acknowledged_is_no_violation() -> None:
    s = delivered_once()
    s.receipts.append({"event_id": "E3", "status": "sent", "state": "lost"})
    assert broken(s) == {}


def _two_tenants(rival_key: str) -> inv.Snapshot:
    s = delivered_once()
    rival = uuid.UUID("01a22900-0000-7000-8000-000000000002")
    s.intents[0]["tenant_id"] = "acme"
    s.intents.append({**s.intents[0], "id": rival, "tenant_id": "rival"})
    s.attempts[0]["tenant_id"] = "acme"
    s.attempts.append({**attempt(1, rival_key, "delivered"), "intent_id": rival})
    s.attempts[-1]["tenant_id"] = "rival"
    return s


def test_an_attempt_key_shared_by_two_tenants_is_caught() -> None:
    assert inv.tenants_kept_apart(_two_tenants("r:attempt:1")) == []
    assert inv.tenants_kept_apart(_two_tenants(KEY1)) != []


def test_a_receipt_stored_on_another_tenants_intent_is_caught() -> None:
    s = delivered_once()
    s.intents[0]["tenant_id"] = "acme"
    s.observations[0].update(tenant_id="acme", intent_id=ID)
    assert inv.tenants_kept_apart(s) == []
    s.observations[0]["tenant_id"] = "rival"
    assert list(broken(s)) == ["tenants_kept_apart"]


def unknown_after(started: bool, reached: bool, profile: dict[str, Any]) -> inv.Snapshot:
    """The intent ended unknown: its call started (or not), the provider has
    its message (or not), under `profile`."""
    s = delivered_once()
    s.intents[0].update(state="unknown", version=4)
    s.attempts = [
        {
            **attempt(1, KEY1, "unknown", "CHECKS_EXHAUSTED"),
            "provider_message_id": None,
            "accepted_at": None,
            "channel": "sms",
            "call_started_at": at(1.2) if started else None,
        }
    ]
    s.transitions = [
        transition(1, None, "create", "pending", 0),
        transition(2, "pending", "claim", "sending", 1, attempt="1"),
        transition(3, "sending", "outcome_unknown", "reconciling", 2),
        transition(4, "reconciling", "reconciliation_exhausted", "unknown", 3),
    ]
    s.ledger_before = s.ledger_after = [send(KEY1, 1.5)] if reached else []
    s.receipts, s.observations = [], []
    s.job_counts = {"j": ({"unknown": 1}, {"unknown": 1})}
    s.metric_counts = ({"unknown": 1}, {"unknown": 1})
    s.profiles = {"sms": {"name": profile.get("name", "x"), **profile}}
    return s


NO_LOOKUP = {"name": "aws_sms", "list_search": False, "reference_search": False}
LIST_SEARCH = {"name": "twilio", "list_search": True}


def test_unknown_after_a_started_call_the_provider_cannot_trace_is_no_violation() -> None:
    assert broken(unknown_after(started=True, reached=False, profile=NO_LOOKUP)) == {}
    assert broken(unknown_after(started=True, reached=True, profile=LIST_SEARCH)) == {}


def test_unknown_without_a_started_call_is_caught() -> None:
    found = broken(unknown_after(started=False, reached=False, profile=NO_LOOKUP))
    assert len(found["unknown_only_where_the_provider_cannot_tell"]) == 1


def test_unknown_where_the_provider_could_prove_absence_is_caught() -> None:
    found = broken(unknown_after(started=True, reached=False, profile=LIST_SEARCH))
    assert "can prove no request" in found["unknown_only_where_the_provider_cannot_tell"][0]


def beside_another_call(claimed: bool) -> inv.Snapshot:
    """The intent's call to a number answered 500 (no message); another
    attempt's call to the same number, a moment later, left a message there,
    claimed by no attempt of ours (its worker died) or claimed."""
    s = unknown_after(started=True, reached=False, profile=LIST_SEARCH)
    number = {"destination_hash": "h1", "profile": "twilio"}
    other = {**send("other:attempt:1", 1.4), **number, "provider_message_id": "SM9"}
    s.ledger_after = [{**send(KEY1, 1.3, "error_5xx"), **number}, other]
    if claimed:
        s.attempts.append({**attempt(1, "other:attempt:1", "accepted"), "intent_id": ID2})
        s.attempts[-1]["provider_message_id"] = "SM9"
    return s


def test_unknown_where_a_list_search_met_another_calls_message_is_no_violation() -> None:
    """Dispatch's rule (two open calls to one number are never told apart by
    a search, test_profile_reconcile.py): neither is provable, so neither is
    sent again; the hour of 2026-12-05 16:39 flagged two such intents."""
    assert inv.unknown_only_where_the_provider_cannot_tell(beside_another_call(False)) == []


def test_unknown_where_the_other_message_was_claimed_is_still_caught() -> None:
    found = inv.unknown_only_where_the_provider_cannot_tell(beside_another_call(True))
    assert len(found) == 1 and "can prove no request" in found[0]


def test_a_send_carrying_no_key_of_ours_is_counted_against_lost_answers() -> None:
    """SNS's Publish carries nothing of ours (harness/wires.py `KEYLESS`):
    a send whose answer was lost is named by no attempt, and must be one of
    the started attempts that never learned their message id."""
    s = delivered_once()
    s.wire, s.profiles = True, {"sms": {"name": "sns"}}
    started = {"channel": "sms", "call_started_at": at(1.2), "provider_message_id": None}
    s.attempts = [{**s.attempts[0], **started}]
    s.ledger_before = [{**send("sns-request-1", 1.5), "channel": "sms"}]
    assert inv.every_send_had_a_committed_claim(s) == []
    s.ledger_before.append({**send("sns-request-2", 1.6), "channel": "sms"})
    [found] = inv.every_send_had_a_committed_claim(s)
    assert found.startswith("2 sms sends carry no key of ours")
    s.profiles = {"sms": {"name": "twilio"}}  # a wire that carries our key: both are strays
    assert len(inv.every_send_had_a_committed_claim(s)) == 2


def test_a_keyless_send_is_judged_by_the_provider_it_went_to_not_the_channels_last() -> None:
    """In a soak the channel moved on from SNS before the end (seen on
    2026-12-05: 41 SNS sends read as strays because SMS played Vonage at
    the end); the ledger's `profile` says where each send went."""
    s = delivered_once()
    s.wire, s.profiles = True, {"sms": {"name": "vonage"}}
    started = {"channel": "sms", "call_started_at": at(1.2), "provider_message_id": None}
    s.attempts = [{**s.attempts[0], **started}]
    s.ledger_before = [{**send("sns-request-1", 1.5), "channel": "sms", "profile": "sns"}]
    assert inv.every_send_had_a_committed_claim(s) == []
    s.ledger_before[0]["profile"] = "vonage"  # a wire that carries our key: a stray
    assert len(inv.every_send_had_a_committed_claim(s)) == 1


def test_unknown_is_judged_by_the_provider_the_attempt_went_to_not_the_channels_last() -> None:
    """A soak switches the channel's provider (issue #43): an attempt sent
    through Twilio, which can prove absence, is not excused because the
    channel plays Vonage, which cannot, by the end of the run."""
    s = unknown_after(started=True, reached=False, profile=NO_LOOKUP)
    s.attempts[0]["provider"] = "twilio"
    found = broken(s)
    assert "unknown at twilio" in found["unknown_only_where_the_provider_cannot_tell"][0]
    # And the other way: sent through a provider that cannot tell, it is excused
    # whatever the channel plays at the end.
    s = unknown_after(started=True, reached=False, profile=LIST_SEARCH)
    s.attempts[0]["provider"] = "vonage"
    assert broken(s) == {}
