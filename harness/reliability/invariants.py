"""The invariants a run must keep, checked from rows and from the provider's
own ledger, never from what the workers believe.

Pure functions over a `Snapshot`, so each check is unit-tested against
hand-made evidence of the violation it exists to catch
(`test_invariants.py`). Each returns human-readable violations; an empty
list means the invariant held.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from harness.wires import WIRED
from tidings.domain.states import TERMINAL_INTENT, IntentState
from tidings.domain.transitions import TABLE, Event
from tidings.providers.simulator.profiles import PROFILES

from .keyless import keyless, unaccounted
from .rows import ACCEPTED_OUTCOMES, Row, when
from .searches import ListSearches, unknown_since

# Workers scan at least every second; anything due longer than this was missed.
DUE_SLACK = timedelta(seconds=10)
# The sweeper runs every second; a passed deadline must be enforced by then.
DEADLINE_SLACK = timedelta(seconds=10)


@dataclass
class Snapshot:
    now: datetime  # when the rows were read
    intents: list[Row]
    attempts: list[Row]
    transitions: list[Row]
    observations: list[Row]
    ledger_before: list[Row]  # the simulator's ledger, read before the rows
    ledger_after: list[Row]  # and after: what the rows may refer to
    receipts: list[Row]
    job_counts: dict[str, tuple[dict[str, int], dict[str, int]]]  # job: (API, rows)
    metric_counts: tuple[dict[str, int], dict[str, int]] | None  # (/metrics, rows)
    extra: dict[str, list[str]] = field(default_factory=dict)  # violations found on the way
    # What each channel's provider offered during the run (GET /_profiles).
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The simulator spoke its providers' own wires (GET /_config `wire`).
    wire: bool = False

    def by_intent(self, rows: Iterable[Row]) -> dict[Any, list[Row]]:
        grouped: dict[Any, list[Row]] = defaultdict(list)
        for row in rows:
            grouped[row["intent_id"]].append(row)
        return grouped


def _accepted_keys(ledger: list[Row]) -> Counter[str]:
    return Counter(e["idempotency_key"] for e in ledger if e["outcome"] in ACCEPTED_OUTCOMES)


def one_acceptance_per_attempt_key(s: Snapshot) -> list[str]:
    """The provider accepted each attempt key at most once."""
    return [
        f"{key}: accepted {n} times"
        for key, n in sorted(_accepted_keys(s.ledger_after).items())
        if n > 1
    ]


def every_send_had_a_committed_claim(s: Snapshot) -> list[str]:
    """Invariant 2: each request the provider saw names an attempt whose
    claim had committed before the request arrived."""
    attempts = {a["attempt_key"]: a for a in s.attempts}
    claims = _claims(s)
    found = []
    unnamed: Counter[str] = Counter()  # channel -> keyless sends no attempt names
    for entry in s.ledger_before:
        attempt = attempts.get(entry["idempotency_key"])
        if attempt is None and keyless(s, entry):
            unnamed[entry["channel"]] += 1
            continue
        if attempt is None:
            found.append(f"{entry['idempotency_key']}: sent, but no attempt row exists")
            continue
        claim = claims.get((attempt["intent_id"], attempt["n"]))
        if claim is None:
            found.append(f"{entry['idempotency_key']}: sent, but no claim transition exists")
        elif when(entry["received_at"]) < claim["at"]:
            found.append(f"{entry['idempotency_key']}: sent before its claim committed")
    return found + unaccounted(s, unnamed)


def no_claim_after_cancel(s: Snapshot) -> list[str]:
    """No attempt starts after a cancel committed. (A claim before it is
    called only after its call-started mark, written while it was still
    uncanceled: docs/states.md.)"""
    found = []
    for intent_id, rows in s.by_intent(s.transitions).items():
        cancels = [t for t in rows if t["event"] == Event.CANCEL.value]
        if not cancels:
            continue
        cancel = cancels[0]
        for t in rows:
            # Versions, not times: a cancel that lost a race retries with the
            # time it read first, so its `at` may precede a claim it follows.
            if t["event"] == Event.CLAIM.value and t["version"] > cancel["version"]:
                found.append(f"{intent_id}: claimed (v{t['version']}) after its cancel")
    return found


def no_claim_at_or_after_expiry(s: Snapshot) -> list[str]:
    """Invariant 5: nothing is claimed once the deadline or token expiry
    passed, and a passed deadline is enforced by the sweeper."""
    expiry = {i["id"]: i["expires_at"] for i in s.intents}
    found = []
    for t in s.transitions:
        at = expiry.get(t["intent_id"])
        if t["event"] == Event.CLAIM.value and at is not None and t["at"] >= at:
            found.append(f"{t['intent_id']}: claimed at {t['at']} after expiry {at}")
    for i in s.intents:
        overdue = i["expires_at"] is not None and i["expires_at"] < s.now - DEADLINE_SLACK
        if overdue and IntentState(i["state"]) not in TERMINAL_INTENT:
            found.append(f"{i['id']}: still {i['state']} {s.now - i['expires_at']} past expiry")
    return found


def every_intent_accounted_for(s: Snapshot) -> list[str]:
    """One current state, reached through the table, matching the audit;
    a nonterminal intent is due later, in flight, or has a check scheduled."""
    found = []
    audit = s.by_intent(s.transitions)
    attempts = s.by_intent(s.attempts)
    for i in s.intents:
        rows = sorted(audit.get(i["id"], []), key=lambda t: t["version"])
        found += _audit_matches(i, rows)
        mine = sorted(attempts.get(i["id"], []), key=lambda a: a["n"])
        if [a["n"] for a in mine] != list(range(1, i["attempt_count"] + 1)):
            found.append(f"{i['id']}: attempt_count {i['attempt_count']} but attempts {mine}")
        reason = _unaccounted(i, mine, s.now)
        if reason:
            found.append(f"{i['id']}: {reason}")
    return found


def _audit_matches(intent: Row, rows: list[Row]) -> list[str]:
    if not rows:
        return [f"{intent['id']}: no audit rows"]
    found = []
    if [t["version"] for t in rows] != list(range(1, len(rows) + 1)):
        found.append(f"{intent['id']}: audit versions have gaps")
    last = rows[-1]
    if last["version"] != intent["version"] or last["to_state"] != intent["state"]:
        found.append(
            f"{intent['id']}: state {intent['state']} v{intent['version']}"
            f" but audit ends at {last['to_state']} v{last['version']}"
        )
    for before, t in itertools.pairwise(rows):
        rule = TABLE.get((IntentState(t["from_state"]), _event(t["event"])))
        if t["from_state"] != before["to_state"] or rule is None or rule.target != t["to_state"]:
            found.append(
                f"{intent['id']}: v{t['version']} {t['from_state']} --{t['event']}-->"
                f" {t['to_state']} is not in the transition table"
            )
    return found


def _event(name: str) -> Event | None:
    try:
        return Event(name)
    except ValueError:
        return None


def _unaccounted(intent: Row, attempts: list[Row], now: datetime) -> str | None:
    state = IntentState(intent["state"])
    if state in TERMINAL_INTENT:
        return None
    if state in (IntentState.PENDING, IntentState.RESEND_DUE):
        due = intent["next_due_at"]
        if due is None or due < now - DUE_SLACK:
            return f"{state} and due since {due}: not claimed"
        return None
    if state is IntentState.SENDING:
        lease = intent["lease_expires_at"]
        if lease is None or lease < now - DUE_SLACK:
            return f"sending with a lease that expired at {lease}, not recovered"
        return None
    current = attempts[-1] if attempts else None
    if current is None or current["next_check_at"] is None:
        return f"{state} with no status check scheduled"
    if current["next_check_at"] < now - DUE_SLACK:
        return f"{state} with a check overdue since {current['next_check_at']}"
    return None


def resend_budget_respected(s: Snapshot) -> list[str]:
    """Attempts that reached the provider never exceed 1 + resend_budget,
    counted both from the provider's ledger and from the attempt rows."""
    key_intent = {a["attempt_key"]: a["intent_id"] for a in s.attempts}
    reached: Counter[Any] = Counter()
    for key in _accepted_keys(s.ledger_after):
        if key in key_intent:
            reached[key_intent[key]] += 1
    rows_reached = Counter(
        a["intent_id"]
        for a in s.attempts
        if a["accepted_at"] is not None or a["state"] in ("delivered", "undelivered")
    )
    found = []
    for i in s.intents:
        allowed = 1 + i["resend_budget"]
        for source, n in (("ledger", reached[i["id"]]), ("rows", rows_reached[i["id"]])):
            if n > allowed:
                found.append(
                    f"{i['id']}: {n} attempts reached the provider ({source}), "
                    f"budget allows {allowed}"
                )
    return found


def no_unjustified_second_message(s: Snapshot) -> list[str]:
    """A second message that reached the provider is licensed only by a
    non-delivery of the one before it; and what the rows say about each
    attempt agrees with what the provider actually received."""
    accepted = _accepted_keys(s.ledger_after)
    found = []
    for intent_id, rows in s.by_intent(s.attempts).items():
        reached = [a for a in sorted(rows, key=lambda a: a["n"]) if accepted[a["attempt_key"]]]
        for earlier in reached[:-1]:
            if earlier["state"] != "undelivered":
                found.append(
                    f"{intent_id}: attempt {earlier['n']} reached the provider and is "
                    f"{earlier['state']}/{earlier['code']}, yet a later attempt was sent too"
                )
    for a in s.attempts:
        got = accepted[a["attempt_key"]] > 0
        if a["state"] in ("accepted", "delivered", "undelivered") and not got:
            found.append(f"{a['attempt_key']}: rows say {a['state']}; the provider never took it")
        if a["state"] == "failed" and a["code"] == "NOT_RECEIVED" and got:
            found.append(f"{a['attempt_key']}: judged NOT_RECEIVED, but the provider has it")
    return found


def counts_derivable_from_rows(s: Snapshot) -> list[str]:
    """Invariant 7: projections (job status, metrics) equal counts of rows."""
    found = []
    for job_id, (api, rows) in sorted(s.job_counts.items()):
        if api != rows:
            found.append(f"job {job_id}: status counts {api} but rows say {rows}")
    if s.metric_counts is not None:
        metrics, rows = s.metric_counts
        if metrics != rows:
            found.append(f"/metrics tidings_intents {metrics} but rows say {rows}")
    return found


def _named(observation: dict[str, Any]) -> str:
    """The ids a stored receipt names, for the report of a doubled one."""
    raw = observation.get("raw") or {}
    named = {k: v for k, v in raw.items() if k not in ("status", "code", "occurred_at")}
    return f"{observation.get('provider_message_id')} {named}"


def _attempts_of(s: Snapshot, dedupe_key: str) -> list[str]:
    intents = {o.get("intent_id") for o in s.observations if o["dedupe_key"] == dedupe_key}
    return [
        f"{a['attempt_key']} {a['provider_message_id']} {a['state']} marked {a['call_started_at']}"
        for a in s.attempts
        if a["intent_id"] in intents
    ]


def no_observation_lost(s: Snapshot) -> list[str]:
    """Every receipt the API acknowledged is stored, exactly once."""
    stored = Counter(o["dedupe_key"] for o in s.observations)
    rows = defaultdict(list)
    for o in s.observations:
        rows[o["dedupe_key"]].append(
            f"{o.get('tenant_id')!r}/{o.get('intent_id')}/{o.get('source')}/{o.get('effect')}"
            f" at {o.get('received_at')} naming {_named(o)}"
        )
    found = [
        f"observation {key} stored {n} times: {', '.join(rows[key])}; attempts then: "
        + "; ".join(_attempts_of(s, key))
        for key, n in stored.items()
        if n > 1
    ]
    # Over a provider's own wire the adapter names an observation its way
    # (Twilio's has no event id): the message and its status word name it.
    by_wire = {(o.get("provider_message_id"), o.get("raw_status")) for o in s.observations}
    for receipt in s.receipts:
        key = f"simulator:event:{receipt['event_id']}"
        if receipt["state"] != "delivered" or key in stored:
            continue
        wired = s.wire and receipt.get("profile") in WIRED
        if wired and (receipt["message_id"], receipt["status"]) in by_wire:
            continue
        found.append(f"receipt {receipt['event_id']} ({receipt['status']}) acknowledged, lost")
    return found


def tenants_kept_apart(s: Snapshot) -> list[str]:
    """Invariant 11 on the evidence: two tenants may use the same idempotency
    key, yet what the provider sees names one attempt of one tenant, and every
    observation lands on an intent of the tenant it was stored for."""
    found = []
    owners: dict[str, set[Any]] = defaultdict(set)
    for a in s.attempts:
        owners[a["attempt_key"]].add((a.get("tenant_id"), a["intent_id"]))
    for key, attempts in sorted(owners.items()):
        if len(attempts) > 1:
            named = sorted(map(str, attempts))
            found.append(f"attempt key {key} names {len(attempts)} attempts: {named}")
    tenant_of = {i["id"]: i.get("tenant_id") for i in s.intents}
    for o in s.observations:
        intent = o.get("intent_id")
        if intent is not None and intent in tenant_of and tenant_of[intent] != o.get("tenant_id"):
            found.append(
                f"observation {o['dedupe_key']} of tenant {o.get('tenant_id')} landed on "
                f"intent {intent} of tenant {tenant_of[intent]}"
            )
    return found


def unknown_only_where_the_provider_cannot_tell(s: Snapshot) -> list[str]:
    """Invariant 3: an outcome ends unknown only after its call started, and
    never where the provider could have proven that no request reached it
    (by our key, our reference, or its list search): such an intent must be
    sent again, not left unknown."""
    accepted = _accepted_keys(s.ledger_after)
    attempts = s.by_intent(s.attempts)
    searches = ListSearches(s.ledger_after, s.attempts)
    ends = unknown_since(s.transitions)
    found = []
    for i in s.intents:
        if i["state"] != IntentState.UNKNOWN.value:
            continue
        mine = sorted(attempts.get(i["id"], []), key=lambda a: a["n"])
        last = mine[-1] if mine else None
        if last is None or last.get("call_started_at") is None:
            found.append(f"{i['id']}: unknown, but its call never started")
            continue
        offered = _offered(s, last)
        proves = any(offered.get(k) for k in ("lookup_by_key", "reference_search"))
        if not proves and offered.get("list_search"):
            proves = not searches.in_vain(last, ends.get(i["id"], s.now))
        if proves and not any(accepted[a["attempt_key"]] for a in mine):
            found.append(
                f"{i['id']}: unknown at {offered.get('name')}, which can prove no request "
                "reached it"
            )
    return found


def _offered(s: Snapshot, attempt: Row) -> dict[str, Any]:
    """What the provider an attempt went to offers: the profile its provider
    account names (a soak switches a channel's provider mid-run, issue #43),
    else the one its channel played (the simulator's own account)."""
    name = attempt.get("provider")
    if name in PROFILES:
        return dict(PROFILES[name].describe())
    return dict(s.profiles.get(attempt.get("channel", ""), {}))


def _claims(s: Snapshot) -> dict[tuple[Any, int], Row]:
    claims = {}
    for t in s.transitions:
        if t["event"] == Event.CLAIM.value and t.get("attempt") is not None:
            claims[(t["intent_id"], int(t["attempt"]))] = t
    return claims


CHECKS: tuple[Callable[[Snapshot], list[str]], ...] = (
    one_acceptance_per_attempt_key,
    every_send_had_a_committed_claim,
    no_claim_after_cancel,
    no_claim_at_or_after_expiry,
    every_intent_accounted_for,
    resend_budget_respected,
    no_unjustified_second_message,
    counts_derivable_from_rows,
    no_observation_lost,
    tenants_kept_apart,
    unknown_only_where_the_provider_cannot_tell,
)


def check_all(s: Snapshot) -> dict[str, list[str]]:
    results = {check.__name__: check(s) for check in CHECKS}
    results.update(s.extra)
    return results
