"""Bulk jobs: frozen audiences, channel resolution, tokens, projections."""

from __future__ import annotations

import copy
import secrets
import threading
from typing import Any

import psycopg
import pytest

from tidings import IdempotencyConflict, IntentState, InvalidInput, ManualClock, Tidings
from tidings.dispatch.message import TemplateCache, prepare
from tidings.jobs import prepare as prepare_module
from tidings.policies import builtin_document

from .dispatch_helpers import sends, simulator, worker


def publish_report_templates(t: Tidings) -> None:
    t.publish_template(
        "report_ready",
        channel="email",
        subject="Report {{ report_name }} is ready",
        body="Your report {{ report_name }} is attached.",
        required_variables=["report_name"],
        attachment_policy="required",
    )
    t.publish_template(
        "report_ready",
        channel="sms",
        body="Report {{ report_name }} is ready: see your e-mail.",
        required_variables=["report_name"],
    )


def audience(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"ref": f"reader-{i}", "email": f"reader{i}@example.com", "phone": "+14155550123", **extra}
        for i in range(n)
    ]


def report_job(t: Tidings, **overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "idempotency_key": "report:8421:revision:7",
        "event_class": "report_ready",
        "purpose": "transactional",
        "template": "report_ready",
        "channels": ["email"],
        "variables": {"report_name": "Q3 media"},
        "audience": audience(5),
        "report": {"id": "8421", "revision": 7},
    }
    request.update(overrides)
    return t.create_job(**request)


@pytest.fixture
def with_report(tidings: Tidings, tmp_path: Any) -> None:
    publish_report_templates(tidings)
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.4 report")
    tidings.register_report(
        "8421", 7, filename="q3.pdf", content_type="application/pdf", location=str(path)
    )


def count(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0] if isinstance(row, tuple) else next(iter(row.values())))


@pytest.mark.usefixtures("with_report")
def test_the_same_job_twice_is_one_job_and_one_intent_per_recipient(
    tidings: Tidings, db_url: str
) -> None:
    first = report_job(tidings)
    again = report_job(tidings)
    assert again["id"] == first["id"]
    tidings.prepare_jobs()
    tidings.prepare_jobs()
    with psycopg.connect(db_url) as conn:
        assert count(conn, "SELECT count(*) FROM jobs") == 1
        assert count(conn, "SELECT count(*) FROM job_recipients") == 5
        assert count(conn, "SELECT count(*) FROM intents") == 5
    with pytest.raises(IdempotencyConflict):
        report_job(tidings, audience=audience(6))


@pytest.mark.usefixtures("with_report")
def test_status_projection_and_recipient_cursor(tidings: Tidings, clock: ManualClock) -> None:
    job = report_job(tidings, audience=audience(7))
    assert tidings.job(job["id"])["status"] == "preparing"
    tidings.prepare_jobs()
    status = tidings.job(job["id"])
    assert status["status"] == "dispatching" and status["counts"] == {"pending": 7}
    core = simulator(clock)
    w = worker(tidings, core)
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    status = tidings.job(job["id"])
    assert status["status"] == "complete" and status["counts"] == {"delivered": 7}
    assert status["cost"]["attempts"] == 7
    page = tidings.job_recipients(job["id"], limit=3)
    refs = [i["recipient_ref"] for i in page["items"]]
    while page["next"]:
        page = tidings.job_recipients(job["id"], after=int(page["next"]), limit=3)
        refs += [i["recipient_ref"] for i in page["items"]]
    assert refs == [f"reader-{i}" for i in range(7)]
    assert all("@" not in str(i) for i in page["items"])


@pytest.mark.usefixtures("with_report")
def test_an_old_job_renders_its_recorded_revision(tidings: Tidings, clock: ManualClock) -> None:
    job = report_job(tidings)
    tidings.publish_template(
        "report_ready",
        channel="email",
        subject="NEW {{ report_name }}",
        body="Changed wording for {{ report_name }}.",
        required_variables=["report_name"],
        attachment_policy="required",
    )
    tidings.prepare_jobs()
    w = worker(tidings, simulator(clock))
    [claimed, *_] = w.claim("email", 1)
    message, _, _ = prepare(tidings.db, claimed, tidings.vault, TemplateCache(), {})
    assert claimed.intent.template_revision == job["template_revisions"]["email"] == 1
    assert message.subject == "Report Q3 media is ready"
    assert [a.id for a in message.attachments] == ["8421"]


@pytest.mark.usefixtures("with_report")
def test_preferred_mode_never_falls_back_silently(tidings: Tidings, clock: ManualClock) -> None:
    members = [
        {"ref": "a", "email": "a@example.com", "phone": "+14155550123", "preferences": ["sms"]},
        {"ref": "b", "email": "b@example.com", "preferences": ["sms", "email"]},
        {"ref": "c", "email": "c@example.com"},
    ]
    job = report_job(
        tidings,
        channels=["sms", "email"],
        audience=members,
        report=None,
        idempotency_key="notice-1",
    )
    tidings.prepare_jobs()
    items = {i["recipient_ref"]: i for i in tidings.job_recipients(job["id"])["items"]}
    assert (items["a"]["channel"], items["a"]["state"]) == ("sms", "pending")
    assert (items["b"]["state"], items["b"]["code"]) == ("no_permitted_channel", "NO_DESTINATION")
    assert (items["c"]["state"], items["c"]["code"]) == ("no_permitted_channel", "NO_DESTINATION")


@pytest.mark.usefixtures("with_report")
def test_all_mode_sends_each_permitted_channel(tidings: Tidings, clock: ManualClock) -> None:
    tidings.opt_out("sms", "+14155550199")
    members = [
        {"ref": "vip", "email": "vip@example.com", "phone": "+14155550123"},
        {"ref": "quiet", "email": "q@example.com", "phone": "+14155550199"},
    ]
    job = report_job(tidings, channels=["email", "sms"], channel_mode="all", audience=members)
    tidings.prepare_jobs()
    states = {
        (i["recipient_ref"], i["channel"]): (i["state"], i["code"])
        for i in tidings.job_recipients(job["id"])["items"]
    }
    assert states == {
        ("vip", "email"): ("pending", "ALLOWED"),
        ("vip", "sms"): ("pending", "ALLOWED"),
        ("quiet", "email"): ("pending", "ALLOWED"),
        ("quiet", "sms"): ("suppressed", "OPTED_OUT"),
    }


def reset_job(t: Tidings, n: int, ttl: int = 300) -> dict[str, Any]:
    t.publish_template(
        "password_reset",
        channel="email",
        subject="Reset your password",
        body="Reset it here: {{ reset_link }}",
        required_variables=["reset_link"],
    )
    return t.create_job(
        idempotency_key="reset:freeze:2026-11",
        event_class="password_reset",
        purpose="security",
        template="password_reset",
        channels=["email"],
        audience=[{"ref": f"player-{i}", "email": f"p{i}@example.com"} for i in range(n)],
        token_ttl_seconds=ttl,
        event_reason="credential stuffing wave",
    )


def test_seed_003_drill(tidings: Tidings, clock: ManualClock, db_url: str) -> None:
    job = reset_job(tidings, 12)
    # preference changed after the snapshot: the frozen audience does not move
    tidings.put_contact("player-0", email="other@example.com", preferences={"channels": ["sms"]})
    tidings.prepare_jobs()
    # suppression added before dispatch: the worker rechecks it
    tidings.suppress("email", "p1@example.com", "complaint")
    minted: list[str] = []

    def mint(intent: Any) -> dict[str, str]:
        token = secrets.token_urlsafe(16)
        minted.append(token)
        return {"reset_link": f"https://game.example/reset?t={token}"}

    core = simulator(clock, rate_429=0.0)
    workers = [worker(tidings, core, batch_size=3) for _ in range(2)]
    for w in workers:
        w.minters["password_reset"] = mint
    # a lease expiring before completion: one worker claims and "dies"
    [abandoned] = workers[0].claim("email", 1)

    def drain(w: Any) -> None:
        while w.dispatch_once():
            pass

    threads = [threading.Thread(target=drain, args=(w,)) for w in workers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    clock.advance(31)
    workers[0].sweep_once()
    workers[0].reconcile_once()
    # the token expires before the recovered intent's retry
    clock.advance(300)
    workers[1].dispatch_once()
    workers[1].sweep_once()
    status = tidings.job(job["id"])
    assert sum(status["counts"].values()) == 12
    assert status["counts"]["suppressed"] == 1
    assert status["counts"].get("expired", 0) == 1
    assert abandoned.intent.id in _expired_ids(db_url)
    deadline = status["expires_at"]
    assert all(e["received_at"] < deadline.isoformat() for e in sends(core))
    assert len(sends(core)) == 10
    with psycopg.connect(db_url) as conn:
        dump = " ".join(
            str(r)
            for t in (
                "intents",
                "attempts",
                "transitions",
                "observations",
                "events",
                "job_recipients",
                "jobs",
            )
            for r in conn.execute(f"SELECT * FROM {t}").fetchall()
        )
    assert minted and not any(token in dump for token in minted)
    assert "reset?t=" not in dump and "p3@example.com" not in dump


def _expired_ids(db_url: str) -> set[Any]:
    with psycopg.connect(db_url) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM intents WHERE state = 'expired'")}


def test_no_send_after_the_token_expired(tidings: Tidings, clock: ManualClock) -> None:
    job = reset_job(tidings, 3, ttl=120)
    tidings.prepare_jobs()
    clock.advance(121)
    w = worker(tidings, simulator(clock))
    w.minters["password_reset"] = lambda intent: {"reset_link": "https://x.example/r"}
    core = w.adapters["email"].core  # type: ignore[attr-defined]
    w.dispatch_once()
    assert sends(core) == []
    w.sweep_once()
    with tidings.db.transaction() as conn:
        states = {r["state"] for r in conn.execute("SELECT state FROM intents").fetchall()}
    assert states == {IntentState.EXPIRED.value}
    # seed 003's job states: every recipient settled, none reached: not "complete"
    assert tidings.job(job["id"])["status"] == "complete_with_failures"


@pytest.mark.usefixtures("with_report")
def test_a_budgeted_preparation_goes_on_page_by_page(
    tidings: Tidings, clock: ManualClock, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker prepares in budgets on a thread of its own, so its heartbeat,
    # sweep and reconciliation never wait for a million-recipient job.
    monkeypatch.setattr(prepare_module, "PAGE_SIZE", 3)
    job = report_job(tidings, audience=audience(7))
    w = worker(tidings, simulator(clock))
    progress = []
    for _ in range(3):
        assert w.prepare_jobs_once(budget_seconds=0.0) == 1
        view = tidings.job(job["id"])
        progress.append((view["status"], sum(view["counts"].values())))
    assert progress == [("preparing", 3), ("preparing", 6), ("dispatching", 7)]
    assert w.prepare_jobs_once(budget_seconds=0.0) == 0  # nothing left to prepare
    with psycopg.connect(db_url) as conn:
        assert count(conn, "SELECT count(*) FROM intents") == 7


@pytest.mark.usefixtures("with_report")
def test_two_jobs_for_the_same_report_revision_each_count_their_whole_audience(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    # Two jobs (say a first mailing and a re-send to the same list) used to
    # share per-recipient keys, and the second job's intents were dropped.
    first = report_job(tidings, audience=audience(4))
    second = report_job(
        tidings, idempotency_key="report:8421:revision:7:again", audience=audience(4)
    )
    tidings.prepare_jobs()
    for job in (first, second):
        view = tidings.job(job["id"])
        assert sum(view["counts"].values()) == 4, view["counts"]
        assert view["counts"] == {"pending": 4}
    w = worker(tidings, simulator(clock))
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    for job in (first, second):
        assert tidings.job(job["id"])["counts"] == {"delivered": 4}
    with psycopg.connect(db_url) as conn:
        assert count(conn, "SELECT count(*) FROM intents") == 8
        assert count(conn, "SELECT count(DISTINCT idempotency_key) FROM intents") == 8


def fallback_policy(t: Tidings, allowed: bool) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc["version"] = f"fallback-{allowed}"
    doc["purposes"]["transactional"]["channel_fallback"] = allowed
    t.publish_policy(doc)


def test_first_available_needs_the_policy_to_allow_it(tidings: Tidings) -> None:
    publish_report_templates(tidings)
    fallback_policy(tidings, allowed=False)
    with pytest.raises(InvalidInput) as refused:
        report_job(tidings, channels=["sms", "email"], channel_mode="first_available", report=None)
    assert refused.value.field == "channel_mode"
    assert "channel_fallback" in refused.value.message


def test_first_available_falls_back_and_records_why(tidings: Tidings, db_url: str) -> None:
    publish_report_templates(tidings)
    fallback_policy(tidings, allowed=True)
    members = [
        {"ref": "both", "phone": "+14155550123", "email": "both@example.com"},
        {"ref": "mail-only", "email": "mail@example.com"},
        {"ref": "neither-left", "phone": "+14155550199"},
    ]
    tidings.opt_out("sms", "+14155550199")
    job = report_job(
        tidings,
        channels=["sms", "email"],
        channel_mode="first_available",
        audience=members,
        report=None,
        idempotency_key="fallback-1",
    )
    tidings.prepare_jobs()
    items = {i["recipient_ref"]: i for i in tidings.job_recipients(job["id"])["items"]}
    assert {r: (i["channel"], i["state"], i["code"]) for r, i in items.items()} == {
        "both": ("sms", "pending", "ALLOWED"),
        "mail-only": ("email", "pending", "ALLOWED"),
        "neither-left": ("sms", "no_permitted_channel", "OPTED_OUT"),
    }
    with psycopg.connect(db_url) as conn:
        audit = dict(
            conn.execute(
                "SELECT i.recipient_ref, t.input -> 'decision_inputs' FROM transitions t"
                " JOIN intents i ON i.id = t.intent_id WHERE t.from_state IS NULL"
                " AND i.job_id = %s",
                (job["id"],),
            ).fetchall()
        )
    assert audit["both"] is None  # nothing passed over: decided at claim as usual
    fallback = audit["mail-only"]["fallback"]
    assert fallback["channel_mode"] == "first_available"
    assert fallback["passed_over"] == [{"channel": "sms", "code": "NO_DESTINATION"}]
    assert fallback["allowed_by"] == "purposes.transactional.channel_fallback"
    passed = audit["neither-left"]["fallback"]["passed_over"]
    assert [p["code"] for p in passed] == ["OPTED_OUT", "NO_DESTINATION"]
