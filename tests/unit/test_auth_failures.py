"""The pre-authentication budget (domain/auth_failures.py), without HTTP:
refill, the key id's own bucket, IPv6 by /64, and the bounded table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidings.domain import auth_failures
from tidings.domain.auth_failures import AuthFailures, client_address

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_failures_spend_a_budget_that_refills_at_its_rate() -> None:
    gate = AuthFailures(rate_per_second=0.5, burst=3)
    for _ in range(3):
        assert gate.retry_after("203.0.113.7", None, T0) is None
        gate.failed("203.0.113.7", None, T0)
    assert gate.retry_after("203.0.113.7", None, T0) == 2  # one token at 0.5/s
    assert gate.retry_after("198.51.100.9", None, T0) is None  # another address
    assert gate.retry_after("203.0.113.7", None, T0 + timedelta(seconds=2)) is None
    assert gate.retry_after("203.0.113.7", None, T0 - timedelta(hours=1)) == 2  # clock behind


def test_a_key_id_has_a_budget_of_its_own_across_addresses() -> None:
    gate = AuthFailures(rate_per_second=1, burst=2)
    gate.failed("203.0.113.1", "0123456789ab", T0)
    gate.failed("203.0.113.2", "0123456789ab", T0)
    assert gate.retry_after("203.0.113.3", "0123456789ab", T0) == 1
    assert gate.retry_after("203.0.113.3", "ba9876543210", T0) is None


def test_ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() -> None:
    assert client_address("2001:db8:1:2:aaaa::1") == client_address("2001:db8:1:2:bbbb::9")
    assert client_address("2001:db8:1:2::1") != client_address("2001:db8:1:3::1")
    assert client_address("::ffff:203.0.113.7") == "203.0.113.7"
    assert client_address("testclient") == "testclient" and client_address(None) is None


def test_off_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    off = AuthFailures(rate_per_second=0, burst=1)
    off.failed("203.0.113.7", None, T0)
    off.failed("203.0.113.7", None, T0)
    assert off.retry_after("203.0.113.7", None, T0) is None
    monkeypatch.setattr(auth_failures, "MAX_TRACKED", 3)
    gate = AuthFailures(rate_per_second=1, burst=1)
    for i in range(5):
        gate.failed(f"203.0.113.{i}", None, T0)
    assert len(gate._buckets) == 3 and gate.retry_after("203.0.113.4", None, T0) == 1
