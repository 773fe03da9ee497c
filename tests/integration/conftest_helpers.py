from __future__ import annotations

from tests.conftest import TEST_SECRET
from tidings import ManualClock, Tidings


def make_tidings(db_url: str, clock: ManualClock | None) -> Tidings:
    return Tidings(db_url, clock=clock, secret_key=TEST_SECRET)
