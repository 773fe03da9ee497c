"""The reliability run's hostile tenant (harness/reliability/hostile.py):
the unreadable rows it plants each round are each quarantined alone by a
real worker while the first tenant's intent is sent, and its check says
so; an intent that ended anywhere else is a violation. (Its API cases,
the template bombs, run against real processes in the bounded run.)"""

from __future__ import annotations

import random

from harness.reliability.hostile import QUARANTINED, RENDER_LIMIT
from harness.reliability.workload import Workload

from tests.conftest import TEST_SECRET
from tests.integration.dispatch_helpers import sends, simulator
from tests.integration.dispatch_helpers import worker as make_worker
from tidings import ManualClock, Tidings


def test_planted_rows_are_quarantined_alone_and_anything_else_is_a_violation(
    db_url: str,
) -> None:
    with Tidings(db_url, secret_key=TEST_SECRET) as t:
        work = Workload(t, "http://127.0.0.1:9", random.Random(1), "hostile")
        work.prepare()
        assert work.hostile is not None
        hostile = work.hostile
        assert hostile._poison_rows(1) == 2
        planted = list(hostile.expected)
        assert set(hostile.expected.values()) == {QUARANTINED}
        _, body = work.request(random.Random(3))
        body["recipient"] = {"ref": "member-1", "phone": "+14155550123"}
        body["channel"] = "sms"
        body.pop("expires_at", None)
        victim = t.notify(**body)

        core = simulator(ManualClock(t.clock.now()))
        w = make_worker(t, core)
        w.dispatch_once("sms")

        assert t.get(victim.id).state.value == "accepted"
        assert hostile.check() == []
        with t.db.transaction() as conn:  # their variables cannot be read back: SQL alone
            rows = conn.execute(
                "SELECT state, decision_code FROM intents WHERE id = ANY(%s::uuid[])", [planted]
            ).fetchall()
        assert [(r["state"], r["decision_code"]) for r in rows] == [QUARANTINED] * 2
        assert len(sends(core)) == 1  # the victim's alone

        # Had one ended otherwise (here: expected to fail its render), the
        # check names it.
        hostile.expected[str(victim.id)] = RENDER_LIMIT
        [violation] = hostile.check()
        assert str(victim.id) in violation and "accepted" in violation
