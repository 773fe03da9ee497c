from __future__ import annotations

from tests.conftest import TEST_SECRET, publish_example_policy
from tidings import ManualClock, Tidings


def make_tidings(db_url: str, clock: ManualClock | None, *, policy: bool = True) -> Tidings:
    """A client of the `default` tenant, with the example policy published
    unless `policy` is False."""
    t = Tidings(db_url, clock=clock, secret_key=TEST_SECRET)
    if policy:
        publish_example_policy(t)
    return t
