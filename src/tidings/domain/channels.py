"""Channel resolution for bulk jobs: which channels may carry this message
to this recipient, decided once, from preference, policy and suppression.

There is no silent fallback. In `preferred` mode a recipient gets their
first preferred channel among the job's channels or, when that one is not
permitted, a terminal `no_permitted_channel` naming why; offering another
channel is a new decision with its own evidence. In `all` mode every job
channel the recipient accepts gets its own intent (a report by e-mail and
an SMS notice), each allowed or excluded on its own.

`first_available` is the explicit fallback a job may ask for where its
purpose's policy allows it (`channel_fallback`): one intent, on the first
channel, in the recipient's order (their preferences, else the job's),
that has a destination and is not refused for good; the channels passed
over are named on the outcome so the fallback is audited as a decision
of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from tidings.domain.policy import Decision


class Mode(StrEnum):
    PREFERRED = "preferred"
    ALL = "all"
    FIRST_AVAILABLE = "first_available"


NO_DESTINATION = "NO_DESTINATION"
NOT_PREFERRED = "NOT_PREFERRED"


@dataclass(frozen=True)
class ChannelFacts:
    """What is known about one candidate channel for one recipient."""

    channel: str
    has_destination: bool
    decision: Decision | None  # the policy's answer; None when not evaluated


@dataclass(frozen=True)
class Outcome:
    channel: str
    sendable: bool
    code: str  # ALLOWED, a policy code, NO_DESTINATION or NOT_PREFERRED
    excluded_as: str | None  # None, "suppressed" or "no_permitted_channel"
    # FIRST_AVAILABLE: the (channel, code) tried before this one, in order.
    passed_over: tuple[tuple[str, str], ...] = ()


def candidates(job_channels: Sequence[str], preferences: Sequence[str], mode: Mode) -> list[str]:
    """The channels to decide on, in the recipient's order of preference."""
    every = mode is not Mode.PREFERRED
    if not preferences:
        return list(job_channels) if every else list(job_channels[:1])
    ordered = [c for c in preferences if c in job_channels]
    return ordered if every else ordered[:1]


def resolve(
    job_channels: Sequence[str],
    preferences: Sequence[str],
    mode: Mode,
    facts: Mapping[str, ChannelFacts],
) -> list[Outcome]:
    chosen = candidates(job_channels, preferences, mode)
    if not chosen:
        return [Outcome(job_channels[0], False, NOT_PREFERRED, "no_permitted_channel")]
    outcomes = [_decide(facts[channel]) for channel in chosen]
    if mode is Mode.PREFERRED:
        return [_preferred(outcomes[0])]
    if mode is Mode.FIRST_AVAILABLE:
        return [_first_available(outcomes)]
    if not any(o.sendable for o in outcomes):
        return [_preferred(o) for o in outcomes]
    return outcomes


def _decide(fact: ChannelFacts) -> Outcome:
    if not fact.has_destination:
        return Outcome(fact.channel, False, NO_DESTINATION, "no_permitted_channel")
    decision = fact.decision
    if decision is not None and decision.final:
        return Outcome(fact.channel, False, decision.code, "suppressed")
    return Outcome(fact.channel, True, "ALLOWED", None)


def _first_available(outcomes: list[Outcome]) -> Outcome:
    """The first sendable outcome, naming those before it; with none, the
    first, naming every one tried."""
    for index, outcome in enumerate(outcomes):
        if outcome.sendable:
            before = tuple((o.channel, o.code) for o in outcomes[:index])
            return replace(outcome, passed_over=before)
    tried = tuple((o.channel, o.code) for o in outcomes)
    return replace(_preferred(outcomes[0]), passed_over=tried)


def _preferred(outcome: Outcome) -> Outcome:
    """With no channel left to use, the recipient has no permitted channel."""
    if outcome.sendable:
        return outcome
    return Outcome(outcome.channel, False, outcome.code, "no_permitted_channel")
