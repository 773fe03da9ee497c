"""The console in a real browser (Playwright driving Debian's Chromium)
against a real uvicorn server and a ledger filled by a real worker.

Needs `pip install playwright` and /usr/bin/chromium (scripts/install-browser);
Playwright's own browser download is not used.
"""

from __future__ import annotations

import base64
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from tests.conftest import TEST_SECRET, with_example_policy
from tests.databases import admin
from tests.integration.dispatch_helpers import (
    offer,
    publish_offer_template,
    racing_worker,
    simulator,
    worker,
)
from tidings import ManualClock, Tidings
from tidings.console import console_router, data
from tidings.observability.alerts import sync_alerts
from tidings.store import api_keys, console_reads

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PHONE = "+14155550123"


@dataclass
class Console:
    url: str
    key: str
    tidings: Tidings
    clock: ManualClock
    canceled_id: uuid.UUID
    canceled_at: Any
    db_url: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _report(t: Tidings, n: int) -> None:
    t.notify(
        idempotency_key=f"report:8421:revision:7:email:reader-{n}",
        channel="email",
        recipient={"ref": f"reader-{n}", "email": f"reader{n}@example.com"},
        template="report_ready",
        variables={"report_id": "8421", "report_revision": 7},
        purpose="transactional",
        event_class="report_delivery",
    )


def _fill(t: Tidings, clock: ManualClock) -> tuple[uuid.UUID, Any]:
    """Forty-five minutes of traffic: offers delivered (a few resent), a
    member canceling while the send is in flight, and a report batch whose
    receipts are held back long enough to open a warning."""
    publish_offer_template(t)
    t.publish_template(
        "report_ready",
        channel="email",
        subject="Report {{ report_id }}",
        body="Report {{ report_id }} revision {{ report_revision }} is attached.",
        required_variables=["report_id", "report_revision"],
    )
    core = simulator(clock, receipt_delay_ms=90_000, delivered_share=0.85, seed=11)
    w = worker(t, core)
    far = timedelta(hours=6)
    canceled_id, canceled_at, n = None, None, 0
    for minute in range(45):
        for _ in range(2 if minute % 4 else 3):
            n += 1
            offer(t, n, expires_at=clock.now() + far)
        if minute == 20:  # R000.6's race: claimed, canceled, then accepted
            w.dispatch_once("sms")
            n += 1
            raced = offer(t, n, expires_at=clock.now() + far)

            def member_cancels(raced_id: Any = raced.id) -> None:
                t.cancel(raced_id, reason="member_left")

            racer = racing_worker(t, core, member_cancels)
            [claimed] = racer.claim("sms", 1)
            assert claimed.intent.id == raced.id
            canceled_at = clock.advance(2)
            racer.send_and_record(claimed)  # the cancel commits on the way
            canceled_id = raced.id
        if minute == 25:
            n += 1
            t.cancel(offer(t, n, expires_at=clock.now() + far).id, reason="member_left")
        w.dispatch_once("sms")
        if minute >= 30:  # the report: receipts held back for hours
            core.configure({"receipt_delay_ms": 4 * 3_600_000})
            _report(t, minute)
            w.dispatch_once("email")
            core.configure({"receipt_delay_ms": 90_000})
        w.reconcile_once()
        clock.advance(60)
    assert canceled_id is not None
    sync_alerts(t.db, clock.now())
    return canceled_id, canceled_at


@pytest.fixture(scope="module")
def console(pg_server_url: str, template_db: str) -> Iterator[Console]:
    name = f"tidings_t_{uuid.uuid4().hex[:12]}"
    admin(pg_server_url, f"CREATE DATABASE {name} TEMPLATE {template_db}")
    db_url = make_conninfo(pg_server_url, dbname=name)
    clock = ManualClock()
    t = with_example_policy(Tidings(db_url, clock=clock, secret_key=TEST_SECRET))
    canceled_id, canceled_at = _fill(t, clock)
    with t.db.transaction() as conn:
        _, key = api_keys.create_key(conn, t.tenant, ["read"], "console test", vault=t.vault)
    app = FastAPI()
    app.include_router(console_router(t.runtime), prefix="/console")
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield Console(
            f"http://127.0.0.1:{port}/console", key, t, clock, canceled_id, canceled_at, db_url
        )
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        t.close()
        admin(pg_server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is absent: run scripts/install-browser")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def _sign_in(tab: Any, console: Console) -> None:
    tab.goto(f"{console.url}/")
    tab.fill("#key", console.key)
    tab.click("button[type=submit]")
    tab.wait_for_selector(".tiles")


@pytest.fixture
def page(browser: Any, console: Console) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    tab = context.new_page()
    _sign_in(tab, console)
    yield tab
    context.close()


def counts(db_url: str) -> dict[str, int]:
    with psycopg.connect(db_url) as conn:
        return dict(conn.execute("SELECT state, count(*) FROM intents GROUP BY state").fetchall())


def test_sign_in_with_the_form(browser: Any, console: Console) -> None:
    context = browser.new_context()
    tab = context.new_page()
    response = tab.goto(f"{console.url}/")
    assert response.status == 401
    tab.fill("#key", "tdg_not_a_real_key")
    tab.click("button[type=submit]")
    assert "That API key is unknown" in tab.inner_text("main")
    tab.fill("#key", console.key)
    tab.click("button[type=submit]")
    tab.wait_for_selector(".tiles")
    assert console.key not in tab.url
    cookies = {c["name"]: c for c in context.cookies()}
    assert console.key not in str(cookies)  # a session id, never the key
    assert cookies["tidings_console_session"]["httpOnly"] is True
    assert cookies["tidings_console_session"]["sameSite"] == "Strict"
    tab.click(".logout button[type=submit]")
    assert "Signed out" in tab.inner_text("main")
    assert tab.goto(f"{console.url}/").status == 401
    context.close()


def test_a_key_in_the_address_bar_is_not_accepted(browser: Any, console: Console) -> None:
    context = browser.new_context()
    tab = context.new_page()
    response = tab.goto(f"{console.url}/jobs?key={console.key}")
    assert response.status == 401 and "key=" not in tab.url
    assert all(console.key not in c["value"] for c in context.cookies())
    context.close()


def test_overview_shows_real_numbers_and_the_open_warning(page: Any, console: Console) -> None:
    assert "key" not in page.url
    rows = counts(console.db_url)
    text = page.inner_text("main")
    delivered = page.inner_text(".tile.s-delivered-text .value")
    assert int(delivered.replace(",", "")) == rows["delivered"]
    for state, n in rows.items():
        cell = page.locator(f"table.counts tr:has(.badge.s-{state}) td.num").first
        assert cell.inner_text().replace(",", "") == str(n)
    alert = page.locator(".alert.sev-warning").first.inner_text().lower()  # CSS uppercases
    assert "report_delivery/email" in alert
    assert "last successful reconciliation" in alert and "oldest nonterminal" in alert
    assert "tidings timeline" in alert
    assert "kill switch" in text.lower() and "off" in page.inner_text(".control.off .state")
    assert page.locator("svg.chart polygon.area").count() >= 3
    _screenshot(page, "console.png")


def _screenshot(page: Any, name: str) -> None:
    """The page as a picture for the docs. Headless Chromium now and then
    refuses one capture ("Unable to capture screenshot") on a loaded
    machine and takes the same picture when asked again, so it is asked up
    to three times."""
    ARTIFACTS.mkdir(exist_ok=True)
    for attempt in range(3):
        try:
            page.screenshot(path=str(ARTIFACTS / name), full_page=True)
            return
        except Exception as exc:
            if "Unable to capture screenshot" not in str(exc) or attempt == 2:
                raise
            page.wait_for_timeout(500)


def test_jobs_page_shows_progress_per_event_class(page: Any, console: Console) -> None:
    page.goto(f"{console.url}/jobs")
    text = page.inner_text("main")
    assert "waitlist_offer" in text and "report_delivery" in text
    assert page.locator("svg.bar").count() >= 2
    _screenshot(page, "console-jobs.png")


def test_timeline_of_a_canceled_intent_shows_the_cancel_and_the_facts(
    page: Any, console: Console
) -> None:
    page.fill("input[name=id]", str(console.canceled_id))
    page.press("input[name=id]", "Enter")
    page.wait_for_selector(".timeline")
    assert str(console.canceled_id) in page.url
    head = page.inner_text(".intent-head")
    assert "canceled" in head
    assert console.canceled_at.strftime("%Y-%m-%d %H:%M:%SZ") in head
    assert "member_left" in head
    assert "after the cancel" in head  # accepted by the provider after it
    assert "default-1" in head  # the policy version
    assert "waitlist_offer rev 1" in head
    timeline = page.inner_text(".timeline")
    assert "cancel" in timeline and "delivered" in timeline  # the late receipt is kept
    assert page.locator(".timeline .entry.kind-observation").count() >= 1
    _screenshot(page, "console-intent.png")


def test_pages_never_show_destinations_or_content(console: Console) -> None:
    bearer = {"Authorization": f"Bearer {console.key}"}
    with httpx.Client(base_url=console.url, headers=bearer) as client:
        html = "".join(
            client.get(path).text for path in ("/", "/jobs", f"/intents/{console.canceled_id}")
        )
    assert PHONE not in html and "4155550123" not in html
    assert "@example.com" not in html
    assert "A spot opened" not in html and "is attached" not in html


def test_access_is_per_key_and_per_tenant(console: Console) -> None:
    with httpx.Client(base_url=console.url) as client:
        assert client.get("/").status_code == 401
        basic = base64.b64encode(f":{console.key}".encode()).decode()
        ok = client.get("/", headers={"Authorization": f"Basic {basic}"})
        assert ok.status_code == 200
        assert "default-src 'none'" in ok.headers["content-security-policy"]
        assert ok.headers["x-frame-options"] == "DENY"
        bearer = {"Authorization": f"Bearer {console.key}"}
        other = client.get("/", params={"tenant": "someone-else"}, headers=bearer)
        assert other.status_code == 403
        assert client.get(f"/intents/{uuid.uuid4()}", headers=bearer).status_code == 404
        assert client.get("/static/console.css").status_code == 200
        assert client.get("/static/..%2Fdata.py").status_code == 404
    with console.tidings.db.transaction() as conn:
        _, send_only = api_keys.create_key(
            conn, console.tidings.tenant, ["send"], "no read", vault=console.tidings.vault
        )
    with httpx.Client(base_url=console.url) as client:
        denied = client.get("/", headers={"Authorization": f"Bearer {send_only}"})
        assert denied.status_code == 403


def test_jobs_page_survives_a_database_without_the_jobs_table(console: Console) -> None:
    with psycopg.connect(console.db_url, row_factory=dict_row) as conn:
        found = conn.execute("SELECT to_regclass('jobs') IS NOT NULL AS present").fetchone()
        if found and found["present"]:
            conn.execute("ALTER TABLE jobs RENAME TO jobs_hidden")  # rolled back below
        view = data.jobs(conn, console.tidings.tenant)
        conn.rollback()
    assert view.table_present is False and view.jobs == []
    assert {g["event_class"] for g in view.classes} == {"waitlist_offer", "report_delivery"}


def test_a_job_row_becomes_progress() -> None:
    job = data._job(
        {
            "id": "019b8e22-c510-7327-9b15-bc3e5c55956e",
            "event_class": "report_delivery",
            "status": "dispatching",
            "audience_size": 3,
            "report_id": "8421",
            "report_revision": 7,
            "template_name": "report_ready",
            "template_revisions": {"email": 2},
        },
        {"delivered": 2, "accepted": 1},
    )
    assert (job.settled, job.total) == (2, 3)
    assert job.report == "8421 rev 7" and job.template == "report_ready rev email:2"


def test_an_empty_tenant_renders_every_page(tidings: Tidings) -> None:
    with tidings.db.transaction() as conn:
        _, key = api_keys.create_key(conn, tidings.tenant, ["read"], "empty", vault=tidings.vault)
    app = FastAPI()
    app.include_router(console_router(tidings.runtime), prefix="/ops")  # any prefix works
    with TestClient(app) as client:
        login = client.get("/ops/")
        assert login.status_code == 401 and 'action="/ops/login"' in login.text
        token = client.cookies["tidings_console_csrf"]
        signed = client.post("/ops/login", data={"key": key, "csrf": token}, follow_redirects=False)
        assert signed.status_code == 303 and signed.headers["location"] == "/ops/"
        overview = client.get("/ops/")
        assert overview.status_code == 200
        assert (
            "No open alerts." in overview.text and "No intents in the last hour." in overview.text
        )
        assert 'href="/ops/static/console.css"' in overview.text
        assert client.get("/ops/jobs").status_code == 200
        assert client.get("/ops/intents/not-a-uuid").status_code == 404


def test_the_overview_shows_each_lanes_queue(tidings: Tidings, clock: ManualClock) -> None:
    tidings.publish_template("ping", channel="email", subject="Ping", body="Ping.")
    tidings.notify(
        idempotency_key="ping:1",
        channel="email",
        recipient={"ref": "u-1", "email": "u1@example.com"},
        template="ping",
        purpose="transactional",
        event_class="ping",
    )
    tidings.create_job(
        idempotency_key="pings",
        event_class="ping",
        purpose="transactional",
        template="ping",
        channels=["email"],
        audience=[{"ref": f"u-{i}", "email": f"u{i}@example.com"} for i in range(3)],
    )
    tidings.prepare_jobs()
    clock.advance(42)
    with tidings.db.transaction() as conn:
        _, key = api_keys.create_key(conn, tidings.tenant, ["read"], "lanes", vault=tidings.vault)
    app = FastAPI()
    app.include_router(console_router(tidings.runtime), prefix="/ops")
    with TestClient(app) as client:
        token = client.get("/ops/") and client.cookies["tidings_console_csrf"]
        client.post("/ops/login", data={"key": key, "csrf": token})
        text = " ".join(client.get("/ops/").text.split())
    assert "by lane" in text
    assert '<td>email</td><td>urgent</td><td class="num">1</td><td class="num">42s' in text
    assert '<td>email</td><td>bulk</td><td class="num">3</td>' in text


def test_the_overview_counts_due_intents_up_to_its_cap_and_says_more(
    tidings: Tidings, clock: ManualClock, monkeypatch: Any
) -> None:
    # Two jobs' lanes are summed, the count stops at the cap, the oldest stays exact.
    monkeypatch.setattr(console_reads, "DUE_COUNT_CAP", 4)
    tidings.publish_template("ping", channel="email", subject="Ping", body="Ping.")
    for k, size in enumerate((3, 3)):
        tidings.create_job(
            idempotency_key=f"pings:{k}",
            event_class="ping",
            purpose="transactional",
            template="ping",
            channels=["email"],
            audience=[{"ref": f"u-{k}-{i}", "email": f"u{k}{i}@example.com"} for i in range(size)],
        )
        tidings.prepare_jobs()
        clock.advance(30)
    with tidings.db.transaction() as conn:
        due = console_reads.due(conn, tidings.tenant, clock.now())
    assert [(r["channel"], r["lane"], r["n"], r["more"]) for r in due] == [
        ("email", "bulk", 4, True)
    ]
    assert (clock.now() - due[0]["oldest"]).total_seconds() == 60
    with tidings.db.transaction() as conn:
        _, key = api_keys.create_key(conn, tidings.tenant, ["read"], "cap", vault=tidings.vault)
    app = FastAPI()
    app.include_router(console_router(tidings.runtime), prefix="/ops")
    with TestClient(app) as client:
        token = client.get("/ops/") and client.cookies["tidings_console_csrf"]
        client.post("/ops/login", data={"key": key, "csrf": token})
        text = " ".join(client.get("/ops/").text.split())
    assert '<td>email</td><td>bulk</td><td class="num">4+</td><td class="num">1m' in text
    assert "4+ due now" in text


def test_the_overview_counts_intents_awaiting_evidence_exactly_with_the_oldest_call(
    tidings: Tidings, clock: ManualClock, monkeypatch: Any
) -> None:
    # The count is the kept one, exact past any cap; the oldest call is read
    # from the index's first entries; no recipients column (counting them
    # would read every intent in flight).
    monkeypatch.setattr(console_reads, "OLDEST_WALK_CAP", 2)
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock, profile="sns"))  # accepted, never answered
    for n in range(5):
        offer(tidings, n, recipient={"ref": f"m{n}", "phone": PHONE}, expires_at=None)
        w.dispatch_once()
        clock.advance(30)
    with tidings.db.transaction() as conn:
        _, key = api_keys.create_key(
            conn, tidings.tenant, ["read"], "evidence", vault=tidings.vault
        )
    app = FastAPI()
    app.include_router(console_router(tidings.runtime), prefix="/ops")
    with TestClient(app) as client:
        token = client.get("/ops/") and client.cookies["tidings_console_csrf"]
        client.post("/ops/login", data={"key": key, "csrf": token})
        text = " ".join(client.get("/ops/").text.split())
    assert (
        '<td>waitlist_offer</td><td>sms</td><td class="num">5</td>'
        '<td class="num strong">2m 30s</td>'
    ) in text
    assert "Recipients</th>" not in text and "5 awaiting evidence" in text
