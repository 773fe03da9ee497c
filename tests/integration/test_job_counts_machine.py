"""A job's kept numbers (migrations/0033_job_counts.sql) equal a recount of
its rows, whatever happens to it: workers that die after their claim, time
passing (leases recovered, receipts, lookups), provider errors that make
retries, a cancel of the whole job, and at the end the retention purge,
after which the numbers stay what they were.

Each example plays a new job, on email and SMS at once, with one recipient
opted out of SMS; every step ends with the kept numbers compared to a
recount of the job's intents and attempts (store/job_counts.py), and the
tenant's kept intent counts (0043) with a recount of its intents.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tidings import ManualClock, Tidings
from tidings.dispatch.observe import apply_observation
from tidings.dispatch.retention import purge
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter
from tidings.store import job_counts

from .conftest_helpers import make_tidings
from .dispatch_helpers import simulator, worker

Numbers = dict[tuple[str, ...], int]

# The same numbers recounted from the evidence rows: the whole job read.
RECOUNT = """
SELECT 'intents' AS kind, i.channel, i.state, coalesce(i.decision_code, '') AS code,
       count(*)::bigint AS n
FROM intents i WHERE i.tenant_id = %(tenant_id)s AND i.job_id = %(job_id)s
GROUP BY i.channel, i.state, coalesce(i.decision_code, '')
UNION ALL
SELECT k.kind, i.channel, '', '', k.n
FROM intents i
CROSS JOIN LATERAL (
    SELECT 'attempts' AS kind, count(*)::bigint AS n FROM attempts a
    WHERE a.tenant_id = i.tenant_id AND a.intent_id = i.id
    UNION ALL
    SELECT 'retries', count(*) FILTER (WHERE a.n > 1) FROM attempts a
    WHERE a.tenant_id = i.tenant_id AND a.intent_id = i.id
    UNION ALL
    SELECT 'reached_provider', count(*) FILTER (WHERE a.accepted_at IS NOT NULL) FROM attempts a
    WHERE a.tenant_id = i.tenant_id AND a.intent_id = i.id
    UNION ALL
    SELECT 'segments', coalesce(sum(a.segments), 0)::bigint FROM attempts a
    WHERE a.tenant_id = i.tenant_id AND a.intent_id = i.id) k
WHERE i.tenant_id = %(tenant_id)s AND i.job_id = %(job_id)s;
"""


def kept(t: Tidings, job_id: Any) -> Numbers:
    found: Counter[tuple[str, ...]] = Counter()
    with t.db.transaction() as conn:
        for r in job_counts.of_job(conn, t.tenant, job_id):
            if r["state"]:
                found["intents", r["channel"], r["state"], r["code"]] += r["intents"]
            elif r["channel"]:
                for kind in ("attempts", "retries", "reached_provider", "segments"):
                    found[kind, r["channel"]] += r[kind]
    return {k: n for k, n in found.items() if n}


def recounted(t: Tidings, job_id: Any) -> Numbers:
    found: Counter[tuple[str, ...]] = Counter()
    with t.db.transaction() as conn:
        for r in conn.execute(RECOUNT, {"tenant_id": t.tenant, "job_id": job_id}).fetchall():
            if r["kind"] == "intents":
                found["intents", r["channel"], r["state"], r["code"]] += r["n"]
            else:
                found[r["kind"], r["channel"]] += r["n"]
    return {k: n for k, n in found.items() if n}


# A tenant's kept counts (migrations/0043_intent_counts.sql) against its
# intents as they are, job or not, deleted by retention or not.
TENANT_KEPT = """
SELECT event_class, channel, state, code, sum(n)::bigint AS n FROM intent_counts
WHERE tenant_id = %(tenant_id)s GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0
"""
TENANT_RECOUNT = """
SELECT event_class, channel, state, coalesce(decision_code, '') AS code, count(*)::bigint AS n
FROM intents WHERE tenant_id = %(tenant_id)s GROUP BY 1, 2, 3, 4
"""


def tenant_numbers(t: Tidings, sql: str) -> Numbers:
    with t.db.transaction() as conn:
        rows = conn.execute(sql, {"tenant_id": t.tenant}).fetchall()
    return {(r["event_class"], r["channel"], r["state"], r["code"]): r["n"] for r in rows}


def build_machine(t: Tidings, clock: ManualClock) -> type[RuleBasedStateMachine]:
    counter = itertools.count()

    class CountsMachine(RuleBasedStateMachine):
        @initialize(n=st.integers(2, 5), errors=st.sampled_from([0.0, 0.3, 0.6]))
        def job(self, n: int, errors: float) -> None:
            k = next(counter)
            self.core = simulator(
                clock, rate_5xx=errors, webhook_url="http://in-process/hook", receipt_delay_ms=2000
            )
            self.adapter = InProcessSimulatorAdapter(self.core)
            self.w = worker(t, self.core, self.adapter, lease_seconds=30)
            t.opt_out("sms", "+14155550199")
            audience = [
                {"ref": f"c{k}-{i}", "email": f"c{k}-{i}@example.com", "phone": "+14155550123"}
                for i in range(n)
            ]
            audience[0]["phone"] = "+14155550199"  # opted out of SMS: excluded
            self.id = t.create_job(
                idempotency_key=f"counts:{k}",
                event_class="counts",
                purpose="transactional",
                template="counts",
                channels=["email", "sms"],
                channel_mode="all",
                audience=audience,
            )["id"]
            t.prepare_jobs()
            self.canceled = False

        @rule(dies=st.booleans(), channel=st.sampled_from(["email", "sms"]))
        def dispatch(self, dies: bool, channel: str) -> None:
            for claimed in self.w.claim(channel, 2):
                if not dies:  # a worker killed after its claim leaves a lease
                    self.w.send_and_record(claimed)

        @rule(seconds=st.integers(1, 60))
        def time_passes(self, seconds: int) -> None:
            clock.advance(seconds)
            with t.db.transaction() as conn:
                for request in self.adapter.due_webhooks():
                    for obs in self.adapter.verify_webhook(request):
                        apply_observation(conn, obs, "webhook", clock.now())
            self.w.sweep_once()
            self.w.reconcile_once()

        @rule()
        def cancel(self) -> None:
            t.cancel_job(self.id, "operator")
            self.canceled = True

        @invariant()
        def kept_equals_recounted(self) -> None:
            if hasattr(self, "id"):
                assert kept(t, self.id) == recounted(t, self.id)
            assert tenant_numbers(t, TENANT_KEPT) == tenant_numbers(t, TENANT_RECOUNT)

        def teardown(self) -> None:
            if not hasattr(self, "id"):
                return
            for _ in range(12):
                self.time_passes(30)
                self.w.dispatch_once()
            before = recounted(t, self.id)
            assert kept(t, self.id) == before
            status = t.job(self.id)
            assert sum(status["counts"].values()) == sum(
                n for k, n in before.items() if k[0] == "intents"
            )
            assert status["cost"]["attempts"] == sum(
                n for k, n in before.items() if k[0] == "attempts"
            )
            # Retention takes the evidence; the kept numbers stay.
            clock.set(status["evidence_expires_at"] + timedelta(hours=1))
            purge(t.db, clock.now())
            # Finished intents go; one still unresolved after the rounds
            # above stays (retention's rule), so the recount need not be
            # empty: what is checked is that the kept numbers do not move.
            assert kept(t, self.id) == before
            assert tenant_numbers(t, TENANT_KEPT) == tenant_numbers(t, TENANT_RECOUNT)
            after = t.job(self.id)
            for field in ("status", "counts", "counts_by_channel", "counts_by_code", "cost"):
                assert after[field] == status[field], field

    return CountsMachine


def test_kept_numbers_equal_a_recount_through_kills_cancels_retries_and_purge(
    db_url: str,
) -> None:
    clock = ManualClock()
    t = make_tidings(db_url, clock)
    t.publish_template("counts", channel="email", subject="Hello", body="Hello")
    t.publish_template("counts", channel="sms", body="Hello")
    try:
        machine = build_machine(t, clock)
        machine.TestCase.settings = settings(
            # Bounded for the database lane; raise both for a deeper hunt.
            max_examples=int(os.environ.get("TIDINGS_COUNTS_MACHINE_EXAMPLES", "4")),
            stateful_step_count=6,
            deadline=None,
            # Not shrunk: each step is database work, and the failing
            # steps print as they are.
            phases=(Phase.explicit, Phase.reuse, Phase.generate),
            suppress_health_check=list(HealthCheck),
        )
        machine.TestCase().runTest()
    finally:
        t.close()
