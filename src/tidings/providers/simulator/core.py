"""The provider simulator's state and decisions, without HTTP.

Thread-safe (one lock) and free of I/O, so the same core serves the FastAPI
app (`app.py`) and the zero-latency in-process adapter used by benchmarks.

Repeatability: every random decision about a send comes from an RNG seeded
by (seed, channel, idempotency key, times that key was seen): the same seed
and requests give the same faults, ids and receipts, however workers
interleave. A message moves queued -> sent (after half the receipt delay)
-> delivered, undelivered or failed (after the delay), computed from the
clock on demand (`advance()` moves it, so tests never wait). Receipts are
planned at send time when a webhook_url is set (`take_due_receipts`).
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from tidings.providers.simulator import views
from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.magic import Magic, magic_for
from tidings.providers.simulator.profiles import Echo, Profile, profile
from tidings.providers.simulator.records import Message, Receipt, Reply, destination_hash

_MAGIC_OUTCOMES = {
    "reject": "rejected",
    "rate_limit": "rate_limited",
    "error_5xx": "error_5xx",
    "timeout": "timeout_after_accept",
}
# The message is taken in each; the answer says so only for "accepted".
_ACCEPTED_OUTCOMES = ("accepted", "timeout_after_accept", "error_5xx_after_accept")
_SOFT_FAILURE_CODES = {"sms": "UNREACHABLE", "email": "BOUNCED"}


iso = views.iso


class NotSupported(Exception):
    """The profile's provider offers no such lookup."""


class LookupFailed(Exception):
    """The provider failed to answer a lookup (`rate_lookup_5xx`)."""


class SimulatorCore:
    def __init__(
        self, config: SimulatorConfig | None = None, *, clock: Callable[[], float] = time.time
    ):
        self._config = config or SimulatorConfig()
        self._profiles = self._config.profiles()
        self._clock = clock
        self._lock = threading.RLock()
        self._clear()

    def _clear(self) -> None:
        self._offset = 0.0
        self._messages: dict[str, Message] = {}
        self._first_by_key: dict[str, str] = {}
        self._seen: dict[tuple[str, str], int] = {}
        self._ledger: list[dict[str, Any]] = []
        self._receipts: list[Receipt] = []
        self._pending: list[tuple[float, int, Receipt]] = []
        self._seq = itertools.count()
        # Its own stream, so lookup faults never shift the sends' decisions.
        self._lookup_rng = random.Random(f"lookups|{self._config.seed}")

    # --- configuration and clock -------------------------------------------

    @property
    def config(self) -> SimulatorConfig:
        return self._config

    def configure(self, changes: Mapping[str, Any]) -> SimulatorConfig:
        with self._lock:
            self._config = self._config.updated(changes)
            self._profiles = self._config.profiles()
            return self._config

    def reset(self, *, config: bool = False) -> None:
        with self._lock:
            self._clear()
            if config:
                self._config = SimulatorConfig()
                self._profiles = self._config.profiles()

    def profile(self, channel: str) -> Profile:
        """The provider this channel's messages meet (profiles.py)."""
        return self._profiles[channel]

    def profiles(self) -> dict[str, dict[str, object]]:
        with self._lock:
            return {channel: p.describe() for channel, p in sorted(self._profiles.items())}

    def now(self) -> float:
        return self._clock() + self._offset

    def advance(self, seconds: float) -> None:
        """Move simulated time forward: statuses progress and receipts fall due."""
        with self._lock:
            self._offset += seconds

    # --- sending -------------------------------------------------------------

    def send(self, channel: str, payload: Mapping[str, Any], *, played: str | None = None) -> Reply:
        """A send on `channel`; `played`: the provider whose own wire it came
        through (the channel's current profile when None: our protocol)."""
        to, key = str(payload["to"]), str(payload["idempotency_key"])
        with self._lock:
            chosen = profile(played) if played else self.profile(channel)
            rng, message_id = self._request_rng(channel, key)
            magic = magic_for(channel, to)
            outcome = self._fault(magic, rng)
            first = self._first_by_key.get(key)
            message = None
            if (
                first is not None
                and outcome in _ACCEPTED_OUTCOMES
                and self._messages[first].channel == channel
                and chosen.honours_idempotency
            ):
                # The provider knows this key: the first message comes back
                # and nothing new is sent.
                outcome, message = "deduplicated", self._messages[first]
            elif outcome in _ACCEPTED_OUTCOMES:
                message = self._accept(message_id, channel, key, to, magic, rng, chosen)
            entry = self._ledger_entry(channel, key, to, message, outcome)
            self._ledger.append({**entry, "profile": chosen.name})
            return self._reply(outcome, message, magic)

    def _played(self, message: Message) -> Profile:
        """The provider a message was sent through."""
        return profile(message.profile) if message.profile else self.profile(message.channel)

    def _request_rng(self, channel: str, key: str) -> tuple[random.Random, str]:
        n = self._seen.get((channel, key), 0)
        self._seen[(channel, key)] = n + 1
        digest = hashlib.sha256(f"{self._config.seed}|{channel}|{key}|{n}".encode()).digest()
        prefix = "SM" if channel == "sms" else "EM"
        return random.Random(int.from_bytes(digest[:8], "big")), prefix + digest[8:24].hex()

    def _fault(self, magic: Magic | None, rng: random.Random) -> str:
        draw = rng.random()  # always drawn, so magic never shifts the stream
        if magic is not None and magic.kind in _MAGIC_OUTCOMES:
            return _MAGIC_OUTCOMES[magic.kind]
        c = self._config
        for outcome, rate in (
            ("rate_limited", c.rate_429),
            ("error_5xx", c.rate_5xx),
            ("timeout_after_accept", c.rate_timeout),
            ("error_5xx_after_accept", c.rate_5xx_after_accept),
        ):
            if draw < rate:
                return outcome
            draw -= rate
        return "accepted"

    def _accept(
        self,
        message_id: str,
        channel: str,
        key: str,
        to: str,
        magic: Magic | None,
        rng: random.Random,
        played: Profile,
    ) -> Message:
        now, delay = self.now(), self._config.receipt_delay_ms / 1000
        status, code = self._final_outcome(channel, magic, rng)
        message = Message(
            message_id, channel, key, now, now + delay / 2, now + delay, status, code, to,
            played.name,
        )  # fmt: skip
        self._messages[message_id] = message
        self._first_by_key.setdefault(key, message_id)
        if self._config.webhook_url and played.receipts:
            self._plan_receipts(message, rng)
        return message

    def _final_outcome(
        self, channel: str, magic: Magic | None, rng: random.Random
    ) -> tuple[str, str | None]:
        draw = rng.random()
        if magic is not None and magic.kind == "final":
            return str(magic.status), magic.code
        if draw < self._config.delivered_share:
            return "delivered", None
        return "undelivered", _SOFT_FAILURE_CODES[channel]

    def _ledger_entry(
        self, channel: str, key: str, to: str, message: Message | None, outcome: str
    ) -> dict[str, Any]:
        return {
            "channel": channel,
            "idempotency_key": key,
            "destination_hash": destination_hash(to),
            "received_at": iso(self.now()),
            "provider_message_id": message.message_id if message else None,
            "outcome": outcome,
        }

    def _reply(self, outcome: str, message: Message | None, magic: Magic | None) -> Reply:
        c = self._config
        latency = c.latency_ms / 1000
        if message is not None and outcome == "error_5xx_after_accept":
            # Taken, then a server error on the way out: the answer denies
            # what happened, and only a lookup or a receipt tells.
            return Reply(500, {"code": "PROVIDER_ERROR"}, latency_s=latency)
        if message is not None:
            stall = c.timeout_stall_ms / 1000 if outcome == "timeout_after_accept" else 0.0
            accepted = {"message_id": message.message_id, "status": "queued"}
            status = 200 if outcome == "deduplicated" else 201
            return Reply(status, accepted, latency_s=latency, stall_s=stall)
        if outcome == "rate_limited":
            limited = {"code": "RATE_LIMITED", "retry_after_seconds": c.retry_after_seconds}
            return Reply(429, limited, {"Retry-After": str(c.retry_after_seconds)}, latency)
        if outcome == "error_5xx":
            return Reply(500, {"code": "PROVIDER_ERROR"}, latency_s=latency)
        code = magic.code if magic is not None else "INVALID_DESTINATION"
        return Reply(400, {"code": code}, latency_s=latency)

    # --- receipts ------------------------------------------------------------

    def _plan_receipts(self, message: Message, rng: random.Random) -> None:
        c = self._config
        played = self._played(message)
        stages = [
            ("sent", None, message.sent_at),
            (message.final_status, message.final_code, message.final_at),
        ]
        events = [self._event(message, played, *stage) for stage in stages]
        dues = [message.sent_at, message.final_at]
        if c.reorder:
            # Same delivery times, events permuted: a terminal event can beat "sent".
            rng.shuffle(events)
        spread = max(c.receipt_delay_ms / 1000, 0.05)
        query = {}
        if played.echo is Echo.CALLBACK_QUERY:
            query = {played.reference_field: message.idempotency_key}
        made: dict[str, Any] = {"query": query, "profile": played.name, "to": message.to}
        for event, due in zip(events, dues, strict=True):
            # Drawn for every stage, reported or not, so profiles share one stream.
            lost, duplicated = rng.random() < c.loss_rate, rng.random()
            if event is None:
                continue
            if lost:
                self._receipts.append(Receipt(event, due, state="lost", **made))
                continue
            self._schedule(Receipt(event, due, **made))
            if duplicated < c.duplicate_rate:
                again = due + rng.uniform(0, spread)
                self._schedule(Receipt(event, again, duplicate=True, **made))

    @staticmethod
    def _event(
        message: Message, played: Profile, status: str, code: str | None, at: float
    ) -> dict[str, Any] | None:
        raw = played.raw(status, code)
        if raw is None:
            return None  # this provider never reports that stage
        return views.receipt_body(
            played, message.message_id, message.idempotency_key, raw, at, status
        )

    def _schedule(self, receipt: Receipt) -> None:
        self._receipts.append(receipt)
        heapq.heappush(self._pending, (receipt.due_at, next(self._seq), receipt))

    def take_due_receipts(self) -> list[Receipt]:
        with self._lock:
            now, due = self.now(), []
            while self._pending and self._pending[0][0] <= now:
                due.append(heapq.heappop(self._pending)[2])
            return due

    def next_receipt_due(self) -> float | None:
        with self._lock:
            return self._pending[0][0] if self._pending else None

    def requeue(self, receipt: Receipt, delay_s: float) -> None:
        with self._lock:
            receipt.due_at = self.now() + delay_s
            heapq.heappush(self._pending, (receipt.due_at, next(self._seq), receipt))

    def mark(self, receipt: Receipt, state: str, *, attempted: bool = True) -> None:
        with self._lock:
            receipt.state = state
            receipt.attempts += int(attempted)

    def receipts(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.view() for r in self._receipts]

    # --- lookups -------------------------------------------------------------

    def lookup(self, message_id: str) -> dict[str, Any] | None:
        """The message by the provider's id, where its provider offers that."""
        with self._lock:
            self._lookup_fault()
            message = self._messages.get(message_id)
            if message is None:
                if not any(p.lookup_by_id for p in self._profiles.values()):
                    raise NotSupported("no lookup by message id")
                return None
            played = self._played(message)
            if message.channel not in played.lookup_by_id:
                raise NotSupported(f"{played.name} has no {message.channel} lookup by id")
            return message.view(self.now(), played)

    def record(self, message_id: str) -> Message | None:
        """A message as kept: a wire's memory of its own answer (no fault, no
        profile check: not a lookup the provider offers)."""
        with self._lock:
            return self._messages.get(message_id)

    def find_by_key(self, idempotency_key: str) -> dict[str, Any] | None:
        """The first message accepted under this key: the `ideal` profile only."""
        with self._lock:
            self._lookup_fault()
            if not any(p.lookup_by_key for p in self._profiles.values()):
                raise NotSupported("no lookup by our key: real providers have none")
            message_id = self._first_by_key.get(idempotency_key)
            message = self._messages.get(message_id) if message_id else None
            return message.view(self.now(), self._played(message)) if message else None

    def search(
        self,
        channel: str,
        to: str,
        since: float,
        until: float | None = None,
        *,
        played: str | None = None,
    ) -> list[dict[str, Any]]:
        """Messages to `to` accepted in [since, until]: the list search of
        `played` (the channel's current provider when None), over its own
        messages only."""
        with self._lock:
            self._lookup_fault()
            asked = profile(played) if played else self.profile(channel)
            if not asked.list_search:
                raise NotSupported(f"{asked.name} has no list search")
            found = (
                m
                for m in self._messages.values()
                if m.channel == channel and m.to == to and self._played(m).name == asked.name
            )
            return self._visible(asked, found, since, until)

    def find_by_reference(
        self, channel: str, reference: str, *, played: str | None = None
    ) -> list[dict[str, Any]]:
        """Messages stored with this reference of ours (Postmark's metadata
        search), among `played`'s (the channel's current provider when None)."""
        with self._lock:
            self._lookup_fault()
            asked = profile(played) if played else self.profile(channel)
            if not asked.reference_search:
                raise NotSupported(f"{asked.name} has no search by reference")
            found = (
                m
                for m in self._messages.values()
                if m.channel == channel
                and m.idempotency_key == reference
                and self._played(m).name == asked.name
            )
            return self._visible(asked, found, None, None)

    def _lookup_fault(self) -> None:
        if self._lookup_rng.random() < self._config.rate_lookup_5xx:
            raise LookupFailed("simulated provider error")

    def _visible(
        self, played: Profile, found: Any, since: float | None, until: float | None
    ) -> list[dict[str, Any]]:
        now = self.now()
        lag = self._config.visible_after_s(played)
        return [
            m.view(now, played)
            for m in sorted(found, key=lambda m: m.accepted_at)
            if m.accepted_at + lag <= now
            and (since is None or m.accepted_at >= since)
            and (until is None or m.accepted_at <= until)
        ]

    def ledger(self, idempotency_key: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [
                dict(e)
                for e in self._ledger
                if idempotency_key is None or e["idempotency_key"] == idempotency_key
            ]
