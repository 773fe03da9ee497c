"""The claim's lanes through real processes (docs/concepts/lanes.md):
`tidings serve`, `tidings worker` and the simulator, as deployed.

Taken oldest-due first, single intents created while a job was sending
waited behind its whole backlog (60 to 65 s behind 5,000 recipients), and
a tenant's job behind another tenant's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from harness.processes import simulator, start_api, start_worker, wait_http, wait_until

from tests.conftest import TEST_SECRET, with_example_policy
from tidings import Tidings
from tidings.cli.devstack import free_port
from tidings.policies import builtin_document
from tidings.store import api_keys

pytestmark = pytest.mark.usefixtures("spawns")

# Two e-mail sends at a time to a 20 ms provider: about 100 a second, so a
# 2,000-recipient job is a backlog of 20 s.
SLOW = {"worker_args": ("--email-concurrency", "2"), "latency_ms": 20}
CALLS = "SELECT count(*) FROM attempts WHERE call_started_at IS NOT NULL"
CALLERS = "SELECT count(DISTINCT tenant_id) FROM attempts WHERE call_started_at IS NOT NULL"
WAITS = """
SELECT array_agg(extract(epoch FROM a.call_started_at - i.created_at))
FROM intents i JOIN attempts a ON a.tenant_id = i.tenant_id AND a.intent_id = i.id
WHERE i.id = ANY(%s::uuid[])"""


def set_up(db_url: str, tenant: str, policy: dict[str, Any] | None = None) -> str:
    """The tenant's policy and templates; its API key."""
    t = with_example_policy(Tidings(db_url, tenant=tenant, secret_key=TEST_SECRET))
    try:
        if policy is not None:
            t.publish_policy(policy)
        t.publish_template("digest", channel="email", subject="Digest", body="Your digest.")
        t.publish_template("reset", channel="email", subject="Reset", body="Your reset.")
        t.publish_template("offer", channel="sms", body="A spot opened.")
        with t.db.transaction() as conn:
            _, key = api_keys.create_key(conn, tenant, ["send", "read"], "lanes", vault=t.vault)
        return key
    finally:
        t.close()


@contextmanager
def deployment(
    db_url: str, home: Path, workers: int = 1, worker_args: tuple[str, ...] = (), **sim: Any
) -> Iterator[str]:
    """A simulator, one API process and `workers` workers; the API's URL."""
    port = free_port()
    with ExitStack() as stack, simulator(**sim) as sim_url:
        api_log = stack.enter_context((home / "serve.log").open("wb"))
        api = start_api(db_url, home, port, output=api_log)
        procs = [api]
        for n in range(workers):
            log = stack.enter_context((home / f"worker-{n}.log").open("wb"))
            procs.append(start_worker(db_url, home, sim_url, *worker_args, output=log))
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", api)
            yield f"http://127.0.0.1:{port}"
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=60)


def client(base: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def post_job(http: httpx.Client, key: str, size: int) -> str:
    body = {
        "idempotency_key": key,
        "event_class": "digest",
        "purpose": "transactional",
        "template": {"name": "digest"},
        "channels": ["email"],
        "audience": [{"ref": f"{key}-{i}", "email": f"{key}-{i}@example.com"} for i in range(size)],
    }
    answer = http.post("/v1/jobs", json=body)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def post_reset(http: httpx.Client, n: int) -> str:
    answer = http.post(
        "/v1/intents",
        json={
            "idempotency_key": f"reset:{n}",
            "channel": "email",
            "recipient": {"ref": f"user-{n}", "email": f"user{n}@example.com"},
            "template": {"name": "reset"},
            "purpose": "transactional",
            "event_class": "password_reset",
        },
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def scalar(db_url: str, sql: str, *params: Any) -> Any:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def sent_of_job(db_url: str, job_id: str) -> int:
    return int(
        scalar(
            db_url,
            "SELECT count(*) FROM attempts a JOIN intents i"
            " ON i.tenant_id = a.tenant_id AND i.id = a.intent_id"
            " WHERE i.job_id = %s AND a.call_started_at IS NOT NULL",
            job_id,
        )
    )


def test_singles_created_during_a_running_job_are_called_within_seconds(
    db_url: str, tmp_path: Path
) -> None:
    key = set_up(db_url, "default")
    with (
        deployment(
            db_url, tmp_path, worker_args=("--email-concurrency", "2"), latency_ms=20
        ) as base,
        client(base, key) as http,
    ):
        job = post_job(http, "digest", 2000)
        wait_until(lambda: sent_of_job(db_url, job) >= 50, what="the job sending")
        resets = []
        for n in range(5):
            resets.append(post_reset(http, n))
            time.sleep(0.5)

        def called() -> int:
            return int(
                scalar(
                    db_url,
                    "SELECT count(*) FROM attempts WHERE intent_id = ANY(%s::uuid[])"
                    " AND call_started_at IS NOT NULL",
                    resets,
                )
            )

        wait_until(lambda: called() == len(resets), what="every reset called")
        waits = scalar(db_url, WAITS, resets)
        backlog = 2000 - sent_of_job(db_url, job)
    assert backlog > 500, "the job finished first: the test proves nothing"
    assert max(float(w) for w in waits) < 5.0, waits


def test_two_tenants_jobs_interleave(db_url: str, tmp_path: Path) -> None:
    first_key, second_key = set_up(db_url, "default"), set_up(db_url, "acme")
    with (
        deployment(
            db_url, tmp_path, worker_args=("--email-concurrency", "2"), latency_ms=20
        ) as base,
        client(base, first_key) as first,
        client(base, second_key) as second,
    ):
        big = post_job(first, "big", 2000)
        wait_until(lambda: sent_of_job(db_url, big) >= 50, what="the first job sending")
        small = post_job(second, "small", 200)
        wait_until(lambda: sent_of_job(db_url, small) == 200, what="the second job sent")
        big_done = sent_of_job(db_url, big)
    assert big_done < 1500, f"the second tenant's job waited for the first's ({big_done} sent)"


def test_a_provider_account_limit_holds_across_tenants_and_workers(
    db_url: str, tmp_path: Path
) -> None:
    policy = builtin_document("default")
    policy["version"] = "account-limit"
    policy["rate_limits"] = [
        {"scope": "provider_account", "channel": "email", "limit": 6, "per_seconds": 3600}
    ]
    for tenant in ("default", "acme"):
        set_up(db_url, tenant, policy)
        # Both tenants' intents wait before any worker starts: who is served
        # first is then the claim's choice, not the order they arrived in.
        t = Tidings(db_url, tenant=tenant, secret_key=TEST_SECRET)
        try:
            for n in range(10):
                t.notify(
                    idempotency_key=f"reset:{n}",
                    channel="email",
                    recipient={"ref": f"user-{n}", "email": f"user{n}@example.com"},
                    template="reset",
                    purpose="transactional",
                    event_class="password_reset",
                )
        finally:
            t.close()
    with deployment(db_url, tmp_path, workers=2):
        wait_until(lambda: scalar(db_url, CALLS) >= 6, what="the account's six sends")
        time.sleep(3)  # time enough for a seventh, were the limit per tenant
        made, tenants = scalar(db_url, CALLS), scalar(db_url, CALLERS)
    assert made == 6
    assert tenants == 2  # shared, not one tenant taking all of it


def test_a_stop_committed_between_the_claim_and_the_call_stops_it(
    db_url: str, tmp_path: Path
) -> None:
    key = set_up(db_url, "default")
    args = ("--sms-concurrency", "1")
    env = {"TIDINGS_FAULTS": "before_mark:pause", "TIDINGS_FAULT_PAUSE_SECONDS": "4"}
    port = free_port()
    with simulator() as sim_url, (tmp_path / "worker.log").open("wb") as wlog:
        api = start_api(db_url, tmp_path, port)
        worker = start_worker(db_url, tmp_path, sim_url, *args, output=wlog, extra_env=env)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_http(f"{base}/healthz", api)
            with client(base, key) as http:
                answer = http.post(
                    "/v1/intents",
                    json={
                        "idempotency_key": "offer:1",
                        "channel": "sms",
                        "recipient": {"ref": "m-1", "phone": "+14155550123"},
                        "template": {"name": "offer"},
                        "purpose": "transactional",
                        "event_class": "waitlist_offer",
                    },
                )
                intent = answer.json()["id"]

                def state() -> str:
                    return str(scalar(db_url, "SELECT state FROM intents WHERE id = %s", intent))

                wait_until(lambda: state() == "sending", what="the claim")
                t = Tidings(db_url, secret_key=TEST_SECRET)
                try:
                    t.handle_inbound("+14155550123", "STOP")  # inside the paused window
                finally:
                    t.close()
                wait_until(lambda: state() == "suppressed", what="the gate's decision")
                calls = httpx.get(f"{sim_url}/_ledger", timeout=10).json()
        finally:
            for p in (api, worker):
                p.terminate()
                p.wait(timeout=60)
    assert calls == []


SCOPES = {
    # scope: (the rule's limit, the intents: (recipient ref, phone, event class))
    "recipient": (1, [("r1", "+14155550101", "offer")] * 3),
    "destination": (1, [(f"r{n}", "+14155550102", "offer") for n in range(3)]),
    "event_class": (3, [(f"r{n}", f"+1415555011{n}", "class_771_offer") for n in range(5)]),
    "tenant": (2, [(f"r{n}", f"+1415555012{n}", "offer") for n in range(4)]),
    "country": (2, [(f"r{n}", f"+1415555013{n}", "offer") for n in range(4)]),
}


def test_every_limit_scope_holds_through_worker_processes(db_url: str, tmp_path: Path) -> None:
    """Seed 000: limits per recipient, number, class, tenant and country, atomic
    with the claim, held by two worker processes; one tenant per scope, so
    each count is that scope's alone. A last tenant has two scopes at once:
    a message that fits one and not the other consumes neither."""
    plans = {**SCOPES, "both": (0, [(f"r{n % 2}", f"+1415555014{n}", "offer") for n in range(4)])}
    for scope, (limit, intents) in plans.items():
        policy = builtin_document("default")
        policy["version"] = f"limits-{scope}"
        rules = (
            [{"scope": scope, "channel": "sms", "limit": limit, "per_seconds": 3600}]
            if scope != "both"
            else [
                {"scope": "recipient", "channel": "sms", "limit": 2, "per_seconds": 3600},
                {"scope": "tenant", "channel": "sms", "limit": 3, "per_seconds": 3600},
            ]
        )
        policy["rate_limits"] = rules
        set_up(db_url, f"limits-{scope.replace('_', '-')}", policy)
        t = Tidings(db_url, tenant=f"limits-{scope.replace('_', '-')}", secret_key=TEST_SECRET)
        try:
            for n, (ref, phone, event_class) in enumerate(intents):
                t.notify(
                    idempotency_key=f"{scope}:{n}",
                    channel="sms",
                    recipient={"ref": ref, "phone": phone},
                    template="offer",
                    purpose="transactional",
                    event_class=event_class,
                )
        finally:
            t.close()
    expected = {f"limits-{s.replace('_', '-')}": limit for s, (limit, _) in SCOPES.items()}
    expected["limits-both"] = 3
    per_tenant = (
        "SELECT tenant_id, count(*) FROM attempts WHERE call_started_at IS NOT NULL GROUP BY 1"
    )
    with deployment(db_url, tmp_path, workers=2):
        wait_until(lambda: scalar(db_url, CALLS) >= sum(expected.values()), what="every send")
        time.sleep(3)  # time enough for one too many
        with psycopg.connect(db_url) as conn:
            made = dict(conn.execute(per_tenant).fetchall())
            spent = conn.execute(
                "SELECT coalesce(sum(used), 0) FROM rate_counters"
                " WHERE tenant_id = 'limits-both' AND scope = 'recipient'"
            ).fetchone()
    assert made == expected
    assert spent is not None and spent[0] == 3  # the fourth consumed no recipient room
