"""`tidings up` prints a new admin key each run; they must not pile up as
admin keys that never expire (issue 40, point 7)."""

from __future__ import annotations

from datetime import timedelta

from tidings import ManualClock, Tidings
from tidings.cli.devstack import create_dev_key
from tidings.store.api_keys import Principal, Refusal


def test_the_development_key_expires_after_a_day(tidings: Tidings, clock: ManualClock) -> None:
    key = create_dev_key(tidings)
    within = tidings.check_api_key(key, now=clock.now() + timedelta(hours=23))
    assert isinstance(within, Principal) and "admin" in within.scopes
    after = tidings.check_api_key(key, now=clock.now() + timedelta(days=1, seconds=1))
    assert after is Refusal.EXPIRED
