"""The soak's old month (harness/reliability/oldmonth.py): intents made and
canceled 400 days back, which a retention purge run mid-soak must take
whole, evidence and all; its check finds them while they are still there."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import psycopg
from harness.reliability.oldmonth import SIZE, OldMonth
from harness.reliability.workload import Workload

from tests.conftest import TEST_SECRET
from tidings import Tidings
from tidings.dispatch.retention import purge


def test_a_purge_takes_the_old_month_and_the_check_sees_it_until_then(db_url: str) -> None:
    with Tidings(db_url, secret_key=TEST_SECRET) as t:
        Workload(t, "http://127.0.0.1:9", random.Random(1), "old").prepare()
        old = OldMonth(db_url, TEST_SECRET, env={})
        old.seed()
        assert len(old.ids) == SIZE
        with psycopg.connect(db_url) as conn:
            row = conn.execute(
                "SELECT min(created_at), count(*) FILTER (WHERE state = 'canceled') "
                "FROM intents WHERE id = ANY(%s::uuid[])",
                [old.ids],
            ).fetchone()
        assert row is not None and row[1] == SIZE
        assert (datetime.now(UTC) - row[0]).days >= 399
        old.purged = {"output": "as if purged"}
        left = old.check()
        assert f"{SIZE} intents row(s) of the old month left by the purge" in left
        assert any("transitions" in line for line in left)
        removed = purge(t.db, datetime.now(UTC))
        assert removed["intents"] == SIZE
        assert old.check() == []
