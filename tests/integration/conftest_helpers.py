from __future__ import annotations

from tidings import ManualClock, Tidings
from tests.conftest import TEST_SECRET


def make_tidings(db_url: str, clock: ManualClock) -> Tidings:
    return Tidings(db_url, clock=clock, secret_key=TEST_SECRET)
