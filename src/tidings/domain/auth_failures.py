"""Failed authentications, limited before the database is asked (issue #39).

A request whose key is unknown, malformed, revoked or expired, or whose
console session is unknown, costs a database read and earns its sender
nothing, and it names no tenant whose rate could pay for it. So each such
failure spends a token of two buckets: its client address's, and its key
id's when the key names one (`tdg_<key id>_<secret>`; guessing one key's
secret from many addresses). A request whose address or key id has no
token left answers 429 before any database read. A request that
authenticates spends nothing here: a busy client is limited only by its
tenant's rate (api/rate_limit.py), never by its successes.

Per process, in memory: N API processes allow N times the rate. Requests
being checked at the same moment may all pass before their failures are
counted, so the overshoot is at most the checks in flight (the thread
pool). IPv6 addresses count by their /64, which one host usually holds
whole. Pure and in memory, kept here so the API and the console share
it. At most `MAX_TRACKED` buckets are kept; past that the least
recently failed are forgotten, which costs an attacker with that many
addresses nothing it did not have already.
"""

from __future__ import annotations

import ipaddress
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

MAX_TRACKED = 100_000


@dataclass
class _Bucket:
    tokens: float
    at: datetime


class AuthFailures:
    """Thread-safe; one per app. `rate` 0 turns it off."""

    def __init__(self, rate_per_second: float, burst: int) -> None:
        self.rate = rate_per_second
        self.burst = max(1, burst)
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def retry_after(self, address: str | None, key_id: str | None, now: datetime) -> int | None:
        """Seconds until this address and key id may fail again, or None
        if they may now (so the request may go on to the database)."""
        if not self.enabled:
            return None
        with self._lock:
            levels = [self._level(name, now) for name in _names(address, key_id)]
        short = [1 - tokens for tokens in levels if tokens < 1]
        return max(1, math.ceil(max(short) / self.rate)) if short else None

    def failed(self, address: str | None, key_id: str | None, now: datetime) -> None:
        if not self.enabled:
            return
        with self._lock:
            for name in _names(address, key_id):
                level = self._level(name, now)
                self._buckets[name] = _Bucket(max(0.0, level - 1), now)
                self._buckets.move_to_end(name)
            while len(self._buckets) > MAX_TRACKED:
                self._buckets.popitem(last=False)

    def _level(self, name: str, now: datetime) -> float:
        bucket = self._buckets.get(name)
        if bucket is None:
            return float(self.burst)
        # A clock behind the last failure adds nothing.
        elapsed = max(0.0, (now - bucket.at).total_seconds())
        return min(float(self.burst), bucket.tokens + elapsed * self.rate)


def client_address(host: str | None) -> str | None:
    """The bucket an address counts in: itself, or its /64 for IPv6."""
    if not host:
        return None
    try:
        parsed = ipaddress.ip_address(host)
    except ValueError:
        return host  # not an address (a test client, a unix socket): as given
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


def _names(address: str | None, key_id: str | None) -> list[str]:
    names = [f"address {address}"] if address else []
    return names + ([f"key {key_id}"] if key_id else [])


@dataclass(frozen=True)
class Presented:
    """A request about to be authenticated: where from, naming which key id."""

    gate: AuthFailures | None
    address: str | None
    key_id: str | None
    now: datetime

    def retry_after(self) -> int | None:
        return None if self.gate is None else self.gate.retry_after(*self._names())

    def failed(self) -> None:
        if self.gate is not None:
            self.gate.failed(*self._names())

    def _names(self) -> tuple[str | None, str | None, datetime]:
        return self.address, self.key_id, self.now


def presented(
    gate: AuthFailures | None, host: str | None, key_id: str | None, now: datetime
) -> Presented:
    """A request from `host` naming `key_id`, under `gate` (None where the
    console is mounted without one). `host` is the peer's address, or the
    one a trusted proxy names: uvicorn rewrites it from `X-Forwarded-For`
    only for `FORWARDED_ALLOW_IPS`."""
    return Presented(gate, client_address(host), key_id, now)
