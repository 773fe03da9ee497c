"""A worker SIGKILLed at every step of the send path, under every provider
profile: what each real provider offers decides how the crash is settled,
never whether a second message goes out.

Per profile: its own database, the simulator playing that provider, the
API receiving its receipts, one doomed worker per fault point (each dies
on its own intent, holding its lease), then a rescuer. The profiles run
side by side; each intent must end as the table below says.

- after_claim, before_mark: no call-started mark, so nothing went out: due
  again at once under the same attempt, sent once;
- before_send: marked, no request left: absence is proven by key, reference
  or list search (ideal, Twilio, Postmark) and it is sent again; elsewhere
  it stays unknown (alerted), never resent;
- after_send_before_record: the provider has it, its id never recorded:
  found by key, reference, list search or a receipt echoing our reference;
  unknown where none exists (SNS, Infrai);
- after_record: recorded; lookups and receipts settle it as any send.

Where the provider never reports delivery at all (SNS), every outcome ends
unknown once the polling budget is spent, and each one sent exactly once.

Where the simulator speaks the provider's own wire (harness/wires.py:
Twilio, Postmark, SendGrid, Vonage, SES, SNS, End User Messaging SMS,
Infrai), the worker and the API use that provider's real adapter against
it: its own request building, answer parsing, lookups and receipt
signature checks go through every crash. The other profiles still speak
the simulator's protocol (`NOT_WIRED` says why). SNS carries nothing of
ours, so its ledger is read by destination: each intent has its own number.
"""

from __future__ import annotations

import copy
import os
import secrets
import signal
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from harness.processes import ledger, simulator, start_api, start_worker, wait_http, wait_until
from harness.wires import KEYLESS, WIRED, adapter_env, ours, webhook_url

from tests.conftest import TEST_SECRET, clone_database, drop_database, with_example_policy
from tests.integration.observability_helpers import evaluate_alerts
from tests.profile_matrix import CHANNEL, finds_lost_answers, proves_absence, reports_delivery
from tidings import Tidings
from tidings.cli.devstack import free_port
from tidings.domain.keys import attempt_key, intent_of_attempt_key
from tidings.policies import builtin_document
from tidings.providers.simulator.records import destination_hash

# Up to nine profiles' processes settle at once, beside the other CI pass and
# its multi-host run: the wait is for real processes on two shared cores.
SETTLE_S = 300
# The channel each profile plays (its own; Infrai's e-mail, which has a lookup).
PROFILES = CHANNEL
# Profiles still on the simulator's own protocol, not their provider's, and why.
NOT_WIRED = {
    "ideal": "no provider: the simulator's own protocol is what it plays",
}
assert set(NOT_WIRED) | set(WIRED) == set(PROFILES), "every profile wired or said why not"


def _chosen(names: str | None) -> list[str]:
    """The profiles this run plays: all of them, unless
    `TIDINGS_CRASH_PROFILES` names some (to play a few alone; CI plays all
    nine in its long lane)."""
    if not names:
        return list(PROFILES)
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    unknown = set(chosen) - set(PROFILES)
    if unknown or not chosen:
        raise pytest.UsageError(f"TIDINGS_CRASH_PROFILES: no such profile {sorted(unknown)}")
    return chosen


CHOSEN = _chosen(os.environ.get("TIDINGS_CRASH_PROFILES"))
POINTS = ("after_claim", "before_mark", "before_send", "after_send_before_record", "after_record")
# What each profile's provider offers (tests/profile_matrix.py).
PROVES_ABSENCE = {p for p in PROFILES if proves_absence(p)}
FINDS_LOST_ANSWERS = {p for p in PROFILES if finds_lost_answers(p)}
REPORTS_DELIVERY = {p for p in PROFILES if reports_delivery(p)}
SENT = {"accepted", "timeout_after_accept", "error_5xx_after_accept"}
TERMINAL = {"delivered", "unknown", "failed", "expired", "canceled", "suppressed"}
POLLS = {
    "first_check_after_seconds": 2,
    "factor": 2,
    "max_interval_seconds": 4,
    "jitter": 0.0,
    "max_checks": 4,
    "give_up_after_seconds": 20,
}


@dataclass(frozen=True)
class Expected:
    states: frozenset[str]
    sends: int  # messages the provider took for the intent
    attempt: int | None  # the attempt whose key went out


def expected(profile: str, point: str) -> Expected:
    delivered = frozenset({"delivered"} if profile in REPORTS_DELIVERY else {"unknown"})
    if point in ("after_claim", "before_mark"):
        return Expected(delivered, 1, 1)
    if point == "before_send":
        if profile in PROVES_ABSENCE:
            return Expected(delivered, 1, 2)
        return Expected(frozenset({"unknown"}), 0, None)
    if point == "after_send_before_record" and profile not in FINDS_LOST_ANSWERS:
        return Expected(frozenset({"unknown"}), 1, 1)
    return Expected(delivered, 1, 1)


@dataclass
class Run:
    profile: str
    intents: dict[str, Any] = field(default_factory=dict)  # point -> intent id
    doomed_exits: dict[str, int | None] = field(default_factory=dict)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    alerts: list[Any] = field(default_factory=list)


def run_profile(server: str, template: str, home: Path, profile: str) -> Run:
    name, url = clone_database(server, template)
    try:
        return _run(url, home / profile, profile)
    finally:
        drop_database(server, name)


def _run(url: str, home: Path, profile: str) -> Run:
    home.mkdir(parents=True)
    channel, secret, api_port = PROFILES[profile], secrets.token_hex(16), free_port()
    run = Run(profile)
    env = {
        "TIDINGS_SIMULATOR_PROFILE": profile,
        "TIDINGS_SIMULATOR_WEBHOOK_SECRET": secret,
    }
    with with_example_policy(Tidings(url, secret_key=TEST_SECRET)) as t:
        _prepare(t, channel)
        hook = webhook_url(f"http://127.0.0.1:{api_port}", profile)
        sim_config = {
            "profile": profile,
            "webhook_url": hook,
            "webhook_secret": secret,
            "receipt_delay_ms": 100,
            "seed": 5,
            "wire": profile in WIRED,
        }
        sim_log = home / "simulator.log"  # why it stopped answering, if it did
        with sim_log.open("wb") as sim_output, simulator(sim_output, **sim_config) as sim:
            env["TIDINGS_SIMULATOR_URL"] = sim
            if profile in WIRED:  # the provider's real adapter, over its wire
                env |= adapter_env(profile, sim, secret, hook)
            # Kept beside the run: what a failure's story needs that the rows lack.
            api_log = (home / "api.log").open("wb")
            api = start_api(url, home, api_port, output=api_log, extra_env=env)
            try:
                wait_http(f"http://127.0.0.1:{api_port}/healthz", api)
                for point in POINTS:
                    intent = _intent(t, channel, f"{profile}:{point}", _phone(point))
                    run.intents[point] = intent.id
                    doomed = start_worker(
                        url,
                        home,
                        sim,
                        "--lease-seconds",
                        "20",
                        faults=f"{point}:kill",
                        extra_env=env,
                    )
                    run.doomed_exits[point] = doomed.wait(timeout=90)
                rescuer = start_worker(url, home, sim, "--lease-seconds", "5", extra_env=env)
                try:
                    wait_until(
                        lambda: _settled(url, run),
                        timeout=SETTLE_S,
                        what=f"every intent of {profile} settled",
                    )
                except AssertionError as exc:
                    raise AssertionError(f"{exc}: {_story(t, run)}") from None
                finally:
                    rescuer.send_signal(signal.SIGTERM)
                    rescuer.wait(timeout=60)
            finally:
                api.terminate()
                api.wait(timeout=30)
                api_log.close()
            try:
                run.ledger = ledger(sim)
            except httpx.HTTPError as exc:
                tail = sim_log.read_text(errors="replace")[-6_000:]
                raise AssertionError(f"{profile}'s simulator at {sim}: {exc!r}:\n{tail}") from None
        run.alerts = evaluate_alerts(t.db, t.clock.now())
    return run


def _prepare(t: Tidings, channel: str) -> None:
    subject = "A spot opened" if channel == "email" else None
    t.publish_template("offer", channel=channel, subject=subject, body="A spot opened.")
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc.update(version="crash-polls", poll_schedule=POLLS)
    t.publish_policy(doc)


def _phone(point: str) -> str:
    """Each intent's own number (no magic suffix: providers/simulator/magic.py)."""
    return f"+1415555{1230 + POINTS.index(point)}"


def _intent(t: Tidings, channel: str, key: str, phone: str) -> Any:
    recipient = {"ref": key, "phone": phone, "email": "member@example.com"}
    recipient.pop("email" if channel == "sms" else "phone")
    return t.notify(
        idempotency_key=key,
        channel=channel,
        recipient=recipient,
        template="offer",
        purpose="transactional",
        event_class="waitlist_offer",
    )


def _settled(url: str, run: Run) -> bool:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT i.id, i.state, i.attempt_count, a.call_started_at IS NOT NULL AS started, "
            "a.provider FROM intents i LEFT JOIN attempts a "
            "ON a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count"
        ).fetchall()
    by_id = {
        row[0]: {"state": row[1], "attempts": row[2], "started": row[3], "provider": row[4]}
        for row in found
    }
    run.rows = {point: by_id[intent_id] for point, intent_id in run.intents.items()}
    return all(
        row["state"] in expected(run.profile, point).states for point, row in run.rows.items()
    )


def _story(t: Tidings, run: Run) -> dict[str, Any]:
    """Where each unsettled intent stands and its timeline (the one an
    operator reads): what a timeout needs to be read without the run."""
    story: dict[str, Any] = {}
    for point, intent_id in run.intents.items():
        row = run.rows.get(point, {})
        if row.get("state") in expected(run.profile, point).states:
            continue
        intent = t.get(intent_id)
        story[point] = {
            "row": row,
            "next_due_at": intent.next_due_at,
            "lease_expires_at": intent.lease_expires_at,
            "now": t.clock.now(),
            "timeline": [
                (e.at.isoformat(), e.kind, e.from_state, e.to_state, e.event, dict(e.detail))
                for e in t.timeline(intent_id)
            ],
        }
    return story


@pytest.fixture(scope="module")
def runs(
    pg_server_url: str, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Run | BaseException]:
    home = tmp_path_factory.mktemp("crash-profiles")
    results: dict[str, Run | BaseException] = {}
    lock = threading.Lock()

    def one(profile: str) -> None:
        try:
            outcome: Run | BaseException = run_profile(pg_server_url, template_db, home, profile)
        except BaseException as exc:  # reported per profile below
            outcome = exc
        with lock:
            results[profile] = outcome

    with ThreadPoolExecutor(len(CHOSEN)) as pool:
        list(pool.map(one, CHOSEN))
    return results


@pytest.mark.timeout(600)
@pytest.mark.parametrize("profile", CHOSEN)
def test_a_crash_at_every_step_ends_as_the_provider_allows_and_never_sends_twice(
    runs: dict[str, Run | BaseException], profile: str
) -> None:
    run = runs[profile]
    if isinstance(run, BaseException):
        raise run
    assert set(run.doomed_exits.values()) == {-signal.SIGKILL}, run.doomed_exits
    sends = _sends(run)
    assert set(sends.values()) <= {1}, f"a key went out twice: {sends}"
    unknown = 0
    for point, intent_id in run.intents.items():
        want, row = expected(profile, point), run.rows[point]
        mine = {k: n for k, n in sends.items() if str(intent_id) in k}
        assert row["state"] in want.states, (point, row)
        assert sum(mine.values()) == want.sends, (point, mine)
        if want.attempt is not None and profile not in KEYLESS:
            assert mine == {attempt_key(intent_id, want.attempt): 1}, (point, mine)
        if row["state"] == "unknown":
            assert row["started"], f"{point}: unknown though its call never started"
            unknown += 1
    # The provider's real adapter sent where the simulator speaks its wire.
    adapter = profile if profile in WIRED else "simulator"
    assert {row["provider"] for row in run.rows.values()} == {adapter}, run.rows
    paged = [a for a in run.alerts if a.condition == "report_delivery_unknown"]
    assert sum(a.details["affected_intents"] for a in paged) == unknown


def _sends(run: Run) -> Counter[str]:
    """The messages the provider took, by our attempt key as it carried it
    (harness/wires.py `ours`); where it carried none (SNS), by the intent
    whose number it went to."""
    by_number = {destination_hash(_phone(p)): str(i) for p, i in run.intents.items()}
    sends: Counter[str] = Counter()
    for entry in run.ledger:
        if entry["outcome"] not in SENT:
            continue
        key = ours(entry["idempotency_key"])
        if intent_of_attempt_key(key) is None:
            key = f"{by_number.get(entry['destination_hash'], 'nobody')}:keyless"
        sends[key] += 1
    return sends
