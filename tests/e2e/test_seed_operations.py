"""Issue #41's operations through the processes an operator runs: `tidings
serve`, `tidings worker` and `tidings simulator`, driven over HTTP and the
CLI exactly as docs/operations.md tells the operator to (the doc's own
command blocks are read from the page and run). The database is only read,
to assert.

- the rollout by cohort ("Rolling out one region and one purpose at a time")
- the reset edge against an SMS-pumping burst (the `request_anomaly` alert)
- `tidings canary run` against the separate simulator ("Synthetic canaries")
- a Unicode SMS, and the ids seed 002 asks for on each boundary's log line
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from harness.processes import ledger, simulator, start_api, start_worker, wait_http, wait_until

from tests.conftest import TEST_SECRET
from tests.databases import clone_database, drop_database
from tests.integration.edge_support import PER_PREFIX, bounded_policy, ordinary, premium
from tidings.cli.devstack import free_port
from tidings.domain.rollout import cohort_bucket
from tidings.policies import builtin_document

OPERATIONS = Path(__file__).parents[2] / "docs" / "operations.md"
SCOPE = {"channel": "sms", "country": "DE", "purpose": "marketing"}  # the doc's example
SENT = {"accepted", "timeout_after_accept"}
# The worker's alert round every second, not every 30 s.
FAST_ALERTS = {"TIDINGS_ALERT_INTERVAL_SECONDS": "1"}


# -- the processes, and the operator's shell -------------------------------


TENANTS = ("rollout", "game", "ops", "unicode")  # a tenant of its own for each test


@dataclass(frozen=True)
class Stack:
    db_url: str
    home: Path
    api: str
    sim: str
    keys: dict[str, str]  # each tenant's admin key, made by `tidings keys create`


@pytest.fixture(scope="module")
def stack(pg_server_url: str, template_db: str, tmp_path_factory: Any) -> Iterator[Stack]:
    """The simulator, one API process and one worker on a database of their
    own, shared by the module's tests (each in a tenant of its own): three
    processes started once, not once a test."""
    name, db_url = clone_database(pg_server_url, template_db)
    home = tmp_path_factory.mktemp("operations")
    port = free_port()
    try:
        with ExitStack() as stack, simulator(receipt_delay_ms=50) as sim_url:
            serve_log = stack.enter_context((home / "serve.log").open("wb"))
            worker_log = stack.enter_context((home / "worker.log").open("wb"))
            procs = [
                start_api(db_url, home, port, output=serve_log),
                start_worker(db_url, home, sim_url, output=worker_log, extra_env=FAST_ALERTS),
            ]
            try:
                # The operators' keys, made while the API starts.
                env = {**os.environ, "DATABASE_URL": db_url, "TIDINGS_SECRET_KEY": TEST_SECRET}
                making = {
                    tenant: subprocess.Popen(
                        [sys.executable, "-m", "tidings.cli", "keys", "create", "--tenant",
                         tenant, "--scopes", "send,read,admin"],
                        env={**env, "TIDINGS_HOME": str(home)},
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    for tenant in TENANTS
                }  # fmt: skip
                wait_http(f"http://127.0.0.1:{port}/healthz", procs[0])
                keys = {}
                for tenant, made in making.items():
                    out, _ = made.communicate(timeout=120)
                    assert made.returncode == 0, out
                    keys[tenant] = out.split()[-1]  # the key is the last word printed
                yield Stack(db_url, home, f"http://127.0.0.1:{port}", sim_url, keys)
            finally:
                for p in procs:
                    p.terminate()
                for p in procs:
                    p.wait(timeout=60)
    finally:
        drop_database(pg_server_url, name)


def shell_env(stack: Stack, tenant: str, **more: str) -> dict[str, str]:
    """An operator's shell: the venv's `tidings` on PATH, the deployment's
    settings, the tenant the commands act for (TIDINGS_TENANT)."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": stack.db_url,
        "TIDINGS_HOME": str(stack.home),
        "TIDINGS_SECRET_KEY": TEST_SECRET,
        "TIDINGS_TENANT": tenant,
        **more,
    }


def run(env: dict[str, str], command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=120
    )


def tidings(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidings.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def doc_commands(section: str) -> list[str]:
    """The shell commands of a section of docs/operations.md, as printed:
    each fenced bash block split where a line starts a new command."""
    text = OPERATIONS.read_text("utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text[start:end], re.S):
        for line in block.splitlines():
            line = line.removeprefix("    ")  # indented under a list item
            if line and not line[0].isspace() and not (commands and commands[-1].endswith("\\")):
                commands.append(line)
            elif commands:
                commands[-1] += "\n" + line
    return commands


def admin_client(base: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def set_up(http: httpx.Client, policy: dict[str, Any], template: dict[str, Any]) -> None:
    """The tenant's policy and template, published over HTTP."""
    published = http.post("/v1/policies", json=policy)
    assert published.status_code == 201, published.text
    made = http.post("/v1/templates", json=template)
    assert made.status_code == 201, made.text


def rows(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def by_key(db_url: str, tenant: str) -> dict[str, tuple[str, str | None, int]]:
    """The tenant's intents by idempotency key: state, decision code, attempts."""
    found = rows(
        db_url,
        "SELECT i.idempotency_key, i.state, i.decision_code,"
        " (SELECT count(*) FROM attempts a WHERE a.tenant_id = i.tenant_id"
        "  AND a.intent_id = i.id)"
        " FROM intents i WHERE i.tenant_id = %s",
        tenant,
    )
    return {k: (s, c, n) for k, s, c, n in found}


def calls(stack: Stack, tenant: str) -> Counter[str]:
    """Provider calls that went out for the tenant's intents, by idempotency key."""
    keys = dict(
        rows(
            stack.db_url,
            "SELECT id::text, idempotency_key FROM intents WHERE tenant_id = %s",
            tenant,
        )
    )
    sent = [e["idempotency_key"].split(":")[1] for e in ledger(stack.sim) if e["outcome"] in SENT]
    return Counter(keys[i] for i in sent if i in keys)


# -- (a) rollout by cohort ---------------------------------------------------


def rollout_policy() -> dict[str, Any]:
    """The example policy, with marketing SMS sendable at any hour and
    receipts looked up a second after the call (the real clock runs here)."""
    doc = builtin_document("default")
    doc["version"] = "rollout-1"
    doc["purposes"]["marketing"] = {
        "consent": {"sms": {"default": "not_required"}, "email": {"default": "not_required"}},
        "send_window": False,
    }
    doc["poll_schedule"]["first_check_after_seconds"] = 1
    return doc


def members(tenant: str) -> dict[str, list[str]]:
    """Recipient refs by cohort: live at 1%, live from 50%, shadowed at 50%."""
    found: dict[str, list[str]] = {"at_1": [], "at_50": [], "shadowed": []}
    for n in range(2000):
        ref = f"member-{n}"
        bucket = cohort_bucket(tenant, ref)
        group = "at_1" if bucket < 1 else "at_50" if bucket < 50 else "shadowed"
        if len(found[group]) < (2 if group == "at_1" else 3):
            found[group].append(ref)
    return found


def promo(http: httpx.Client, ref: str, key: str, purpose: str = "marketing") -> None:
    """An SMS to a German mobile number (its last digits no magic suffix)."""
    body = {
        "idempotency_key": key,
        "channel": "sms",
        "recipient": {"ref": ref, "phone": f"+49170123{4500 + int(ref.split('-')[1]) % 90:04d}"},
        "template": {"name": "offer"},
        "purpose": purpose,
        "event_class": "promo" if purpose == "marketing" else "order_update",
    }
    made = http.post("/v1/intents", json=body)
    assert made.status_code == 201, made.text


def report(http: httpx.Client, since: str) -> dict[str, Any]:
    got = http.post("/v1/controls/rollout-report", json={"since": since, "scope": SCOPE})
    assert got.status_code == 200, got.text
    return dict(got.json())


def settled(http: httpx.Client, since: str, intents: int) -> dict[str, Any] | None:
    found = report(http, since)
    return found if found["settled"] and found["counts"]["intents"] == intents else None


def test_a_rollout_step_by_step_as_the_operations_page_says(stack: Stack) -> None:
    tenant = "rollout"
    curl_1_percent, report_text, report_json = doc_commands(
        "Rolling out one region and one purpose at a time"
    )
    found = re.search(r"--since (\S+)", report_json)
    assert found is not None and '"live_percent": 1}' in curl_1_percent
    since = found.group(1)
    group = members(tenant)
    key = stack.keys[tenant]
    env = shell_env(stack, tenant, TIDINGS=stack.api, ADMIN_KEY=key)
    http = admin_client(stack.api, key)
    set_up(http, rollout_policy(), {"name": "offer", "channel": "sms", "body": "A spot."})

    # Step 3, the small cohort, typed as the page prints it.
    typed = run(env, curl_1_percent)
    assert typed.returncode == 0, typed.stderr
    control = json.loads(typed.stdout)
    assert control.get("live_percent") == 1 and control.get("enabled") is True, typed.stdout
    assert control["scope"] == {**SCOPE, "event_class": None}

    # The scope's intents, and one of another purpose outside it.
    for ref in (*group["at_1"], *group["at_50"], *group["shadowed"]):
        promo(http, ref, f"step1:{ref}")
    promo(http, "member-1", "order:1", purpose="transactional")
    first = wait_until(lambda: settled(http, since, 8), what="the 1% step settled")
    assert first["live_percent"] == 1 and first["shadow_mode"] is True
    counts = first["counts"]
    assert (counts["decided"], counts["shadowed"], counts["waiting"]) == (8, 6, 0), counts
    assert counts["sent"] == counts["delivered"] == 2 and counts["unknown"] == 0, counts

    # Step 4, reconciled with the page's commands: the CLI agrees with the API.
    shown = run(env, report_text)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "live cohort: 1%" in shown.stdout and "  settled" in shown.stdout, shown.stdout
    as_json = run(env, report_json)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["counts"] == counts

    # Step 5: the cohort only grows, and growing re-decides no one.
    body = {"enabled": True, "scope": SCOPE}
    shrink = http.put("/v1/controls/shadow-mode", json={**body, "live_percent": 0})
    assert shrink.status_code == 409 and shrink.json()["code"] == "COHORT_SHRINK", shrink.text
    grown = http.put("/v1/controls/shadow-mode", json={**body, "live_percent": 50})
    assert grown.status_code == 200 and grown.json()["live_percent"] == 50, grown.text
    for ref in (*group["at_1"], *group["at_50"], *group["shadowed"]):
        promo(http, ref, f"step2:{ref}")
    second = wait_until(lambda: settled(http, since, 16), what="the 50% step settled")["counts"]
    assert second["sent"] == second["delivered"] == 2 + 5 and second["shadowed"] == 6 + 3

    # To stop, the kill switch on the scope: its marketing waits, the rest sends.
    stop = http.put("/v1/controls/kill-switch", json={"enabled": True, "scope": SCOPE})
    assert stop.status_code == 200, stop.text
    for ref in group["at_1"]:
        promo(http, ref, f"held:{ref}")
    promo(http, "member-2", "order:2", purpose="transactional")
    wait_until(
        lambda: by_key(stack.db_url, tenant)["order:2"][0] == "delivered", what="order:2 sent"
    )
    held = run(env, report_json)
    assert held.returncode == 1, held.stdout + held.stderr  # two wait: not settled
    waiting = json.loads(held.stdout)
    assert waiting["counts"]["waiting"] == 2 and waiting["settled"] is False
    assert waiting["counts"] == report(http, since)["counts"]
    lifted = http.put("/v1/controls/kill-switch", json={"enabled": False, "scope": SCOPE})
    assert lifted.status_code == 200, lifted.text
    wait_until(lambda: settled(http, since, 18), what="the held ones sent after the lift")

    intents = by_key(stack.db_url, tenant)
    # Each step's live cohort, and only it, was sent; once each.
    live = {f"step1:{r}" for r in group["at_1"]} | {"order:1", "order:2"}
    live |= {f"step2:{r}" for r in (*group["at_1"], *group["at_50"])}
    live |= {f"held:{r}" for r in group["at_1"]}
    assert {k for k, v in intents.items() if v[0] == "delivered"} == live
    sent = calls(stack, tenant)
    assert set(sent) == live and set(sent.values()) == {1}, sent
    # The 1% step's shadowed intents of recipients live at 50% stayed
    # shadowed: no attempt, ever.
    for ref in (*group["at_50"], *group["shadowed"]):
        assert intents[f"step1:{ref}"] == ("suppressed", "SHADOW_MODE", 0)
    for ref in group["shadowed"]:
        assert intents[f"step2:{ref}"] == ("suppressed", "SHADOW_MODE", 0)


# -- (b) the reset edge ------------------------------------------------------


def reset(phone: str, key: str) -> dict[str, Any]:
    """A reset request, as edge_support.reset_body builds it, on the real clock."""
    return {
        "idempotency_key": key,
        "channel": "sms",
        "recipient": {"ref": f"player-{key}", "phone": phone, "timezone": "UTC"},
        "template": {"name": "password_reset"},
        "variables": {"code": "123456"},
        "purpose": "security",
        "event_class": "password_reset",
        "expires_at": (datetime.now(UTC) + timedelta(minutes=10)).isoformat(),
    }


def console_overview(api: str, key: str) -> str:
    page = httpx.get(f"{api}/console/", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert page.status_code == 200, page.text
    return page.text


def open_alerts(api: str, key: str) -> str:
    """The console overview's open alerts section ("" when none is open)."""
    page = console_overview(api, key)
    start = page.find('aria-label="Open alerts"')
    return "" if start < 0 else page[start : page.index("</section>", start)]


def test_a_pumping_burst_is_refused_at_the_edge_and_ordinary_resets_are_delivered(
    stack: Stack,
) -> None:
    tenant = "game"
    # Per premium range; the policy lets PER_PREFIX through. 40, not 30: the
    # alert's floor is 30 in the last hour, estimated from hourly windows,
    # so a burst split by the top of the hour must still reach it.
    burst = 40
    key = stack.keys[tenant]
    http = admin_client(stack.api, key)
    policy = bounded_policy()
    policy["poll_schedule"]["first_check_after_seconds"] = 1
    template = {
        "name": "password_reset",
        "channel": "sms",
        "body": "Your code is {{ code }}",
        "required_variables": ["code"],
    }
    set_up(http, policy, template)
    answers: Counter[tuple[str, int]] = Counter()
    for n in range(burst):
        for country in ("GB", "LV"):
            # (numbers past the simulator's magic suffixes, ....0000 to ....0009)
            got = http.post(
                "/v1/intents", json=reset(premium(100 + n, country), f"pump-{country}-{n}")
            )
            answers[(country, got.status_code)] += 1
            if got.status_code == 429:
                assert got.json()["code"] == "REQUEST_LIMIT" and got.json()["scope"] == "prefix"
                assert 1 <= int(got.headers["Retry-After"]) <= 3600
        if n % 4 == 0:  # players' own resets, in between
            got = http.post("/v1/intents", json=reset(ordinary(10 + n), f"player-{n}"))
            assert got.status_code == 201, got.text
            answers[("player", 201)] += 1
    assert answers == {
        ("GB", 201): PER_PREFIX,
        ("GB", 429): burst - PER_PREFIX,
        ("LV", 201): PER_PREFIX,
        ("LV", 429): burst - PER_PREFIX,
        ("player", 201): burst // 4,
    }
    made = 2 * PER_PREFIX + burst // 4
    seen: list[Counter[str]] = []

    def all_delivered() -> bool:
        seen.append(Counter(v[0] for v in by_key(stack.db_url, tenant).values()))
        return seen[-1] == {"delivered": made}

    try:
        wait_until(all_delivered, what="every created reset delivered")
    except AssertionError as timeout:
        raise AssertionError(f"{timeout}; last seen {seen[-1]}") from None
    # Nothing of a refused request was created, so nothing of it was sent.
    intents = by_key(stack.db_url, tenant)
    sent = calls(stack, tenant)
    assert len(intents) == made and set(sent) == set(intents) and set(sent.values()) == {1}
    assert not any(
        k.startswith("pump-") and int(k.rsplit("-", 1)[1]) >= PER_PREFIX for k in intents
    )
    # The page's "what to do": the alert says someone is trying ...
    shown = wait_until(
        lambda: (
            "request_anomaly:password_reset:country:GB" in (o := open_alerts(stack.api, key)) and o
        ),
        what="the request_anomaly alert on the console",
    )
    assert "request_anomaly:password_reset:country:LV" in shown
    # ... each refusal is in the API's log as the page says, with no number ...
    logged = [
        json.loads(line)
        for line in (stack.home / "serve.log").read_text(errors="replace").splitlines()
        if line.startswith("{") and "request refused at the edge" in line
    ]
    refusals = [e for e in logged if e.get("tenant_id") == tenant]
    assert len(refusals) == 2 * (burst - PER_PREFIX), refusals
    assert {(e["event_class"], e["bound"], e["code"]) for e in refusals} == {
        ("password_reset", "prefix", "REQUEST_LIMIT")
    }
    assert all(e["actor"].startswith("api:") for e in refusals)
    assert not any("+44909" in str(e) or "+371900" in str(e) for e in refusals)
    # ... and SMS to the country stops under the kill switch the page shows.
    scope = json.loads(" ".join(doc_kill_switch().split()))
    assert scope == {"enabled": True, "scope": {"channel": "sms", "country": "GB"}}
    assert http.put("/v1/controls/kill-switch", json=scope).status_code == 200
    # (a GB number: +44 7911 would be Guernsey's)
    uk = http.post("/v1/intents", json=reset("+447400123456", "player-uk"))
    us = http.post("/v1/intents", json=reset(ordinary(99), "player-us"))
    assert uk.status_code == us.status_code == 201, uk.text + us.text
    wait_until(
        lambda: by_key(stack.db_url, tenant)["player-us"][0] == "delivered",
        what="the US reset delivered under the GB kill switch",
    )
    assert by_key(stack.db_url, tenant)["player-uk"] == ("pending", None, 0)


def doc_kill_switch() -> str:
    """The kill switch docs/operations.md's `request_anomaly` entry tells the
    operator to set, as printed."""
    text = OPERATIONS.read_text("utf-8")
    entry = text[text.index("- **`request_anomaly`**") :]
    found = re.search(r"`PUT /v1/controls/kill-switch` with `(\{.*?\}\})`", entry, re.S)
    assert found is not None, "the request_anomaly entry names no kill switch"
    return found.group(1)


# -- (c) the canary ----------------------------------------------------------


def test_canary_run_against_the_simulator_process_and_its_alert(stack: Stack) -> None:
    env = shell_env(stack, "ops", TIDINGS_SIMULATOR_URL=stack.sim)
    key = stack.keys["ops"]
    members_before = rows(stack.db_url, "SELECT count(*) FROM intents")
    calls_before = len(ledger(stack.sim))
    good = tidings(env, "canary", "run", "--json")
    assert good.returncode == 0, good.stdout + good.stderr
    results = json.loads(good.stdout)["results"]
    assert [(r["account"], r["channel"], r["target"], r["ok"]) for r in results] == [
        ("simulator", "sms", "simulator-success", True),
        ("simulator", "email", "simulator-success", True),
    ]
    assert all("receipt" in r["answer"] for r in results), results  # looked up
    assert len(ledger(stack.sim)) == calls_before + 2  # the simulator process took both

    # The simulator answers every send 500: the round fails and pages.
    httpx.put(f"{stack.sim}/_config", json={"rate_5xx": 1.0}, timeout=5).raise_for_status()
    try:
        bad = tidings(env, "canary", "run", "--json")
    finally:
        httpx.put(f"{stack.sim}/_config", json={"rate_5xx": 0.0}, timeout=5).raise_for_status()
    assert bad.returncode == 1, bad.stdout + bad.stderr
    failed = json.loads(bad.stdout)["results"]
    assert {(r["ok"], r["code"]) for r in failed} == {(False, "PROVIDER_ERROR")}, failed
    assert all("HTTP 500" in r["answer"] for r in failed), failed
    assert "canary_failed:simulator" in open_alerts(stack.api, key)
    assert '<tr class="canary-failed">' in console_overview(stack.api, key)  # its table

    # A good round clears it.
    again = tidings(env, "canary", "run")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "ok     simulator sms (simulator-success): ACCEPTED" in again.stdout, again.stdout
    assert "canary_failed:simulator" not in open_alerts(stack.api, key)
    # Canaries are not member traffic.
    assert rows(stack.db_url, "SELECT count(*) FROM intents") == members_before


# -- a Unicode SMS, and its log lines -----------------------------------------

# Seed 002's boundaries of one intent after its creation, as the worker logs them.
BOUNDARIES = (
    "intent claimed",
    "provider call",
    "provider answered",
    "attempt recorded",
    "observation applied",
)


def log_lines(path: Path, intent_id: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{") and intent_id in line:
            entry = json.loads(line)
            if entry.get("intent_id") == intent_id:
                found.setdefault(entry["event"], []).append(entry)
    return found


def test_a_unicode_sms_goes_out_as_ucs2_and_every_boundary_logs_its_ids(stack: Stack) -> None:
    tenant = "unicode"
    http = admin_client(stack.api, stack.keys[tenant])
    policy = builtin_document("default")
    policy["version"] = "unicode-1"
    policy["poll_schedule"]["first_check_after_seconds"] = 1
    body = "Место в {{ class_name }} 🎉 до 18:00"  # Cyrillic and an emoji: UCS-2
    template = {
        "name": "offer_ru",
        "channel": "sms",
        "body": body,
        "required_variables": ["class_name"],
    }
    set_up(http, policy, template)
    made = http.post(
        "/v1/intents",
        json={
            "idempotency_key": "offer:ru:1",
            "channel": "sms",
            "recipient": {"ref": "member-ru", "phone": "+14155554321"},
            "template": {"name": "offer_ru"},
            "variables": {"class_name": "Йога" * 13},  # 72 units: two UCS-2 segments
            "purpose": "transactional",
            "event_class": "waitlist_offer",
        },
    )
    assert made.status_code == 201, made.text
    intent_id = made.json()["id"]
    wait_until(
        lambda: by_key(stack.db_url, tenant)["offer:ru:1"][0] == "delivered",
        what="the Unicode SMS delivered",
    )
    [(encoding, segments, message_id)] = rows(
        stack.db_url,
        "SELECT encoding, segments, provider_message_id FROM attempts WHERE intent_id = %s",
        intent_id,
    )
    assert (encoding, segments) == ("UCS-2", 2)
    created = log_lines(stack.home / "serve.log", intent_id)
    worked = log_lines(stack.home / "worker.log", intent_id)
    for event, found in (("intent created", created), *((b, worked) for b in BOUNDARIES)):
        [line] = found.get(event, [{}])
        assert line.get("tenant_id") == tenant and line.get("channel") == "sms", (event, line)
        assert line.get("template_revision") == "offer_ru@1", (event, line)
        if event != "intent created":  # no provider is chosen before the claim
            assert line.get("provider") == "simulator", (event, line)
    for event in ("provider answered", "attempt recorded", "observation applied"):
        assert worked[event][0]["provider_message_id"] == message_id
    # Neither the destination nor the rendered text on any line of either process.
    for log in ("serve.log", "worker.log"):
        text = (stack.home / log).read_text(errors="replace")
        assert "4155554321" not in text and "Йога" not in text and "\\u0419" not in text
