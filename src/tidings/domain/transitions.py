"""The transition table: the one contract shared by the API, the workers,
the sweeper and the operator tooling.

It starts from the table of requirement R000.2 (docs/requirements.md) and
extends it for `failed`, `no_permitted_channel`, an explicit `reconciling` state for outcomes that
are not known yet (a crashed worker, a timed-out call), and a terminal
`unknown` for outcomes that stayed unknown past their reconciliation budget.
Unknown is never treated as failure, so it never leads to a resend.

`docs/states.md` is generated from this module (`python -m
tidings.domain.transitions`); edit the table here, never the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tidings.domain.states import (
    TERMINAL_ATTEMPT,
    TERMINAL_INTENT,
    AttemptState,
    IntentState,
)

S = IntentState


class Event(StrEnum):
    CLAIM = "claim"
    DEFER = "defer"
    PROVIDER_ACCEPTED = "provider_accepted"
    PROVIDER_DEFERRED = "provider_deferred"
    RETRIES_EXHAUSTED = "retries_exhausted"
    PROVIDER_REJECTED = "provider_rejected"
    PREPARE_FAILED = "prepare_failed"
    LIMIT_DEFERRED = "limit_deferred"
    RELEASED = "released"
    OUTCOME_UNKNOWN = "outcome_unknown"
    CALL_NOT_STARTED = "call_not_started"
    NOT_RECEIVED = "not_received"
    DELIVERED = "delivered"
    UNDELIVERED_RETRYABLE = "undelivered_retryable"
    RESEND_BUDGET_EXHAUSTED = "resend_budget_exhausted"
    DELIVERY_FAILED = "delivery_failed"
    RECONCILIATION_EXHAUSTED = "reconciliation_exhausted"
    CANCEL = "cancel"
    POLICY_DENIED = "policy_denied"
    NO_PERMITTED_CHANNEL = "no_permitted_channel"
    DEADLINE_PASSED = "deadline_passed"
    QUARANTINED = "quarantined"


@dataclass(frozen=True)
class Rule:
    source: frozenset[IntentState]
    event: Event
    target: IntentState
    side_effect: str


def _rule(sources: set[IntentState], event: Event, target: IntentState, effect: str) -> Rule:
    return Rule(frozenset(sources), event, target, effect)


NONTERMINAL: frozenset[IntentState] = frozenset(set(IntentState) - TERMINAL_INTENT)

RULES: tuple[Rule, ...] = (
    _rule(
        {S.PENDING, S.RESEND_DUE},
        Event.CLAIM,
        S.SENDING,
        "lease the intent, consume rate allowance, open attempt n+1",
    ),
    _rule(
        {S.PENDING, S.RESEND_DUE},
        Event.DEFER,
        S.PENDING,
        "store the next eligible time (quiet window, rate limit)",
    ),
    _rule(
        {S.SENDING},
        Event.PROVIDER_ACCEPTED,
        S.ACCEPTED,
        "record provider id, schedule first status check",
    ),
    _rule(
        {S.SENDING},
        Event.PROVIDER_DEFERRED,
        S.PENDING,
        "provider did not process it (429, refused): retry after its time",
    ),
    _rule(
        {S.SENDING},
        Event.RETRIES_EXHAUSTED,
        S.FAILED,
        "a retryable failure (429, refused, misconfigured) past the policy's "
        "retry.max_failures: end with its code instead of retrying forever",
    ),
    _rule({S.SENDING}, Event.PROVIDER_REJECTED, S.FAILED, "record the permanent rejection code"),
    _rule(
        {S.SENDING},
        Event.PREPARE_FAILED,
        S.FAILED,
        "the message could not be built (template, destination); nothing was sent",
    ),
    _rule(
        {S.SENDING},
        Event.LIMIT_DEFERRED,
        S.PENDING,
        "the rendered message would break a spend limit: wait, nothing was sent",
    ),
    _rule(
        {S.SENDING},
        Event.RELEASED,
        S.PENDING,
        "the worker let go before making the call (it is stopping, a kill switch "
        "covers the intent, or the deadline passed while it waited): nothing was sent, "
        "due again now",
    ),
    _rule(
        {S.SENDING},
        Event.OUTCOME_UNKNOWN,
        S.RECONCILING,
        "look the attempt up before any new attempt",
    ),
    _rule(
        {S.SENDING},
        Event.CALL_NOT_STARTED,
        S.PENDING,
        "the lease expired and no call-started mark was written: nothing was sent, so "
        "it is due again at once under the same attempt (number and key)",
    ),
    _rule(
        {S.RECONCILING},
        Event.PROVIDER_ACCEPTED,
        S.ACCEPTED,
        "the lookup found the message: keep polling it",
    ),
    _rule(
        {S.RECONCILING},
        Event.NOT_RECEIVED,
        S.PENDING,
        "the provider proves it never got the message: a new attempt may start",
    ),
    _rule(
        {S.RECONCILING},
        Event.RECONCILIATION_EXHAUSTED,
        S.UNKNOWN,
        "stop checking; the outcome stays unknown and visible",
    ),
    _rule({S.ACCEPTED, S.RECONCILING}, Event.DELIVERED, S.DELIVERED, "stop polling"),
    _rule(
        {S.ACCEPTED, S.RECONCILING},
        Event.UNDELIVERED_RETRYABLE,
        S.RESEND_DUE,
        "schedule a resend within the resend budget",
    ),
    _rule(
        {S.ACCEPTED, S.RECONCILING},
        Event.RESEND_BUDGET_EXHAUSTED,
        S.FAILED,
        "no budget left for another attempt",
    ),
    _rule({S.ACCEPTED, S.RECONCILING}, Event.DELIVERY_FAILED, S.FAILED, "permanent non-delivery"),
    _rule(
        {S.ACCEPTED},
        Event.RECONCILIATION_EXHAUSTED,
        S.UNKNOWN,
        "no terminal evidence within the polling budget",
    ),
    _rule(
        set(NONTERMINAL),
        Event.CANCEL,
        S.CANCELED,
        "no further attempt, and a claimed call not yet started is withheld; "
        "late observations update only the attempt",
    ),
    _rule(
        {S.PENDING, S.RESEND_DUE},
        Event.POLICY_DENIED,
        S.SUPPRESSED,
        "record the policy decision and its code",
    ),
    _rule(
        {S.PENDING},
        Event.NO_PERMITTED_CHANNEL,
        S.NO_PERMITTED_CHANNEL,
        "record the channel resolution evidence",
    ),
    _rule(
        {S.PENDING, S.RESEND_DUE},
        Event.QUARANTINED,
        S.FAILED,
        "the worker could not decode or prepare this row (a value out of range, "
        "written around the checks): failed alone with code `UNDECODABLE`, counted and "
        "alerted, so the rest of its batch goes on; nothing was sent",
    ),
    _rule(
        {S.SENDING},
        Event.QUARANTINED,
        S.UNKNOWN,
        "its lease expired and the sweeper cannot recover it (its policy version "
        "missing or unreadable, the row undecodable): the call may have started, so it "
        "is never resent; it ends `unknown` with code `POLICY_UNREADABLE` or "
        "`UNDECODABLE`, counted and alerted, and the other leases are recovered",
    ),
    _rule(
        set(NONTERMINAL),
        Event.DEADLINE_PASSED,
        S.EXPIRED,
        "release the offered spot; no further attempt",
    ),
)

TABLE: dict[tuple[IntentState, Event], Rule] = {
    (source, rule.event): rule for rule in RULES for source in sorted(rule.source)
}


class InvalidTransition(Exception):
    def __init__(self, state: IntentState, event: Event) -> None:
        super().__init__(f"invalid transition: {state} + {event}")
        self.state = state
        self.event = event


def next_state(state: IntentState, event: Event) -> IntentState:
    rule = TABLE.get((state, event))
    if rule is None:
        raise InvalidTransition(state, event)
    return rule.target


def allowed(state: IntentState, event: Event) -> bool:
    return (state, event) in TABLE


def on_undelivered(resend_budget: int, attempts_made: int) -> Event:
    """A retryable non-delivery resends only while the budget has room.

    The budget counts resends: the first attempt is free, so an intent with a
    budget of 2 makes at most 3 attempts that reached the provider.
    """
    if attempts_made <= resend_budget:
        return Event.UNDELIVERED_RETRYABLE
    return Event.RESEND_BUDGET_EXHAUSTED


# Attempts: observations move them forward only, never back. `unknown` can
# still be resolved by late evidence; the other terminal states are final.
ATTEMPT_RANK: dict[AttemptState, int] = {
    AttemptState.SENDING: 0,
    AttemptState.UNKNOWN: 1,
    AttemptState.ACCEPTED: 2,
    AttemptState.UNDELIVERED: 3,
    AttemptState.FAILED: 3,
    AttemptState.DELIVERED: 3,
}


def attempt_advances(current: AttemptState, observed: AttemptState) -> bool:
    """Whether an observation may move an attempt from `current` to `observed`."""
    if current in TERMINAL_ATTEMPT:
        return False
    return ATTEMPT_RANK[observed] > ATTEMPT_RANK[current]


def markdown_table() -> str:
    lines = [
        "| Current state | Event | Next state | Side effect |",
        "|---|---|---|---|",
    ]
    for rule in RULES:
        sources = " or ".join(f"`{s}`" for s in IntentState if s in rule.source)
        lines.append(f"| {sources} | `{rule.event}` | `{rule.target}` | {rule.side_effect} |")
    return "\n".join(lines)


def states_document() -> str:
    terminal = ", ".join(f"`{s}`" for s in IntentState if s in TERMINAL_INTENT)
    ranks = "\n".join(f"| `{a}` | {r} |" for a, r in ATTEMPT_RANK.items())
    return (
        "# Intent states\n\n"
        "Generated from `src/tidings/domain/transitions.py` by\n"
        "`python -m tidings.domain.transitions > docs/states.md`; do not edit.\n\n"
        f"Terminal states: {terminal}. A terminal intent never moves again.\n\n"
        f"{markdown_table()}\n\n"
        "## Attempts\n\n"
        "An observation moves an attempt only to a higher rank; a repeated or\n"
        "older observation is stored but changes nothing. Rank 3 is final.\n\n"
        "| Attempt state | Rank |\n|---|---|\n"
        f"{ranks}\n\n"
        "## Between the claim and the call\n\n"
        'A worker calls the provider only after its durable "call started" mark\n'
        "has committed (`attempts.call_started_at`, written for a group of calls\n"
        "in one statement right before they go out). The same statement is the\n"
        "last read of the claim: it marks a call only while the intent is still\n"
        "`sending` at the claim's version under the worker's lease, with no kill\n"
        "switch covering it, no opt-out or suppression of its destination\n"
        "newer than the claim's read and no pause of its provider account. A\n"
        "cancel, an expiry, a kill switch, a STOP, a suppression or a pause\n"
        "(any worker's 429) that commits before it stops the call; the attempt\n"
        "closes with nothing sent:\n\n"
        "| Attempt | Why | The intent |\n|---|---|---|\n"
        "| `failed` / `WITHDRAWN` | the intent moved first (canceled, expired, "
        "its lease recovered) | stays where that move put it |\n"
        "| `failed` / `KILL_SWITCH` | a kill switch turned on covers it | "
        "`released`: due again, claimed once the switch is lifted |\n"
        "| `failed` / `EXPIRED` | its deadline passed while it waited | "
        "`released`: the next claim or the sweep expires it |\n"
        "| `failed` / `PROVIDER_PAUSED` | its provider account paused (or its tenant "
        "was held back on it) after the claim, by any worker's answers | `released`: "
        "due again when the pause ends |\n"
        "| `failed` / `RECIPIENT_STOPPED` | an opt-out (a STOP) or a suppression of "
        "its destination committed after the claim | `released`: due again at once; "
        "the claim's gate reads it and decides (`opted_out` or `suppressed` with the "
        "policy's code) |\n"
        "| `failed` / `WORKER_STOPPED` | the worker is stopping | "
        "`released`: due again at once |\n"
        "| `failed` / `EXPIRES_BEFORE_TURN` | at the calls' recent pace its turn "
        "would end after its expiry (dispatch/window.py) | `released`: due again at "
        "its expiry, when policy expires it |\n\n"
        "A cancel that commits later than that, while the request is on its\n"
        "way, cannot unsend it: the attempt keeps the provider's answers and\n"
        "the intent stays canceled ([R000.6](requirements.md)).\n\n"
        'So that `canceled` is never read as "nothing was sent", an intent\n'
        "canceled, expired or failed after one of its messages was handed to a\n"
        "provider carries a `state_note` (`domain/state_words.py`), for example\n"
        '"canceled after the message was delivered: a cancel cannot unsend it".\n'
        "The API's intent has it as a field (null otherwise), and `tidings\n"
        "intents show`, `tidings timeline` and the console's intent page print it\n"
        "under the state.\n\n"
        "The timeline lists the intent's moves in version order. A cancel reads\n"
        "its time before it waits for a claim to commit, so its move (a later\n"
        "version) can carry an earlier time than the claim's; each entry keeps its\n"
        "own time, and the attempts and receipts fall between the moves by theirs.\n\n"
        "## After a crash\n\n"
        "A worker that dies holding claims leaves intents `sending` whose lease\n"
        "runs out. Lease recovery reads each one's mark. Without it the call\n"
        "never started: the attempt row is removed and the intent is due again\n"
        "at once (`call_not_started`), under the same attempt number and key, so\n"
        "nothing is unknown and nothing is lost. With it the call may have\n"
        "reached the provider: the attempt becomes `unknown` and the intent\n"
        "`reconciling`, looked up (by provider message id, by our reference or\n"
        "the provider's list search, where the provider offers one) before any\n"
        "new attempt.\n"
    )


if __name__ == "__main__":
    print(states_document(), end="")
