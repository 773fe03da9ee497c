"""The three scenarios from the source documents, as a user would run them."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx

from tidings.cli.devstack import DevStack
from tidings.client import Tidings
from tidings.domain.intent import Intent
from tidings.providers.base import HttpRequest
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.store import demo as demo_reads
from tidings.store.contacts import ConsentRecord


@dataclass
class Scenario:
    name: str
    key_prefix: str
    intent_ids: list[UUID] = field(default_factory=list)
    replays: int = 0
    notes: list[str] = field(default_factory=list)
    featured: UUID | None = None
    job_id: Any = None


def waitlist(stack: DevStack, key: str) -> Scenario:
    """R000 (docs/requirements.md): a freed spot offered by SMS, a cancellation race, a deadline."""
    t = stack.tidings
    s = Scenario("waitlist offer", "waitlist:771:")
    now = t.clock.now()
    offer: dict[str, Any] = {
        "channel": "sms",
        "template": "waitlist_offer",
        "purpose": "transactional",
        "event_class": "waitlist_offer",
    }
    variables = {"class_name": "Spin 7am", "starts": "tomorrow 07:00", "deadline": "18:00"}
    # The member about to win the race against the worker.
    race = t.notify(
        idempotency_key=f"waitlist:771:1843:offer:{stack.run_id}",
        **offer,
        variables=variables,
        recipient={"ref": "member-1843", "phone": "+14155550143"},
        expires_at=now + timedelta(minutes=30),
    )
    _race(stack, race)
    stack.start_worker()  # everything else is the background worker's
    s.featured = race.id
    s.intent_ids.append(race.id)
    # An offer the provider keeps throttling until its deadline passes.
    late = t.notify(
        idempotency_key=f"waitlist:771:1844:offer:{stack.run_id}",
        **offer,
        variables=variables,
        recipient={"ref": "member-1844", "phone": "+14155550429"},
        expires_at=now + timedelta(seconds=4),
    )
    s.intent_ids.append(late.id)
    # The same offer delivered three times by a queue: one intent, one SMS.
    body = {
        "idempotency_key": f"waitlist:771:1842:offer:{stack.run_id}",
        "channel": "sms",
        "recipient": {
            "ref": "member-1842",
            "phone": "+14155550123",
            "timezone": "America/New_York",
        },
        "template": {"name": "waitlist_offer"},
        "variables": variables,
        "purpose": "transactional",
        "event_class": "waitlist_offer",
        "expires_at": (now + timedelta(minutes=30)).isoformat(),
    }
    answers = [_post(stack, key, "/v1/intents", body) for _ in range(3)]
    s.replays = sum(1 for a in answers if a.status_code == 200)
    s.intent_ids.append(UUID(answers[0].json()["id"]))
    s.notes.append(f"HTTP answers to the replayed offer: {[a.status_code for a in answers]}")
    return s


class _CancelOnTheWay(SimulatorAdapter):
    """The simulator adapter, with the member's cancel committing while
    worker A's request is on its way: after the worker's last read of the
    intent, so nothing can stop that request any more."""

    def __init__(self, stack: DevStack, cancel: Callable[[], object]) -> None:
        super().__init__(stack.simulator_url, stack.secret)
        self._cancel: Callable[[], object] | None = cancel

    def transmit(self, request: HttpRequest) -> httpx.Response:
        cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()
        return super().transmit(request)


def _race(stack: DevStack, intent: Intent) -> None:
    """Worker A claims and calls; the member cancels while the request is on
    its way; the provider accepts it; a delivered receipt arrives later. The
    intent stays canceled. (A cancel committed before worker A's read right
    before the call would have stopped the call: docs/states.md.)"""
    from tidings.dispatch.runner import Worker

    def member_cancels() -> None:
        stack.tidings.cancel(intent.id, reason="member_left", actor="member-app")

    with _CancelOnTheWay(stack, member_cancels) as adapter:  # its own HTTP client
        worker_a = Worker(stack.tidings.runtime, {"sms": adapter}, owner="worker-a")
        claimed = [c for c in worker_a.claim("sms", 10) if c.intent.id == intent.id]
        for item in claimed:
            worker_a.send_and_record(item)


def report(stack: DevStack, key: str, home: Path) -> Scenario:
    """R002 (docs/requirements.md): a generated report mailed to a list, an
    SMS notice for high-priority readers, and one address that hard-bounces:
    its receipt suppresses the address for every later send."""
    t = stack.tidings
    s = Scenario("report to a list", "report:8421:")
    # Each run generates the report anew: a new revision, so a new notification.
    revision = _next_revision(t, "8421")
    path = home / "reports" / f"8421-r{revision}.pdf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(f"%PDF-1.4\n% tidings demo report 8421 revision {revision}\n".encode())
    t.register_report(
        "8421",
        revision,
        filename="media-report-q3.pdf",
        content_type="application/pdf",
        location=str(path),
        size_bytes=path.stat().st_size,
    )
    readers = [
        {"ref": f"reader-{i}", "email": f"reader{i}@example.com", "preferences": ["email"]}
        for i in range(12)
    ]
    readers[4]["email"] = "hardbounce+reader4@example.com"
    for vip in (0, 1, 2):
        readers[vip].update(phone=f"+1415555021{vip}", preferences=["email", "sms"])
    request = {
        "idempotency_key": f"report:8421:revision:{revision}",
        "event_class": "report_ready",
        "purpose": "transactional",
        "template": {"name": "report_ready"},
        "channels": ["email", "sms"],
        "channel_mode": "all",
        "audience": readers,
        "variables": {"report_name": "Q3 media"},
        "report": {"id": "8421", "revision": revision},
    }
    first = _post(stack, key, "/v1/jobs", request)
    again = _post(stack, key, "/v1/jobs", request)
    s.replays = 1 if again.json().get("id") == first.json().get("id") else 0
    s.notes.append(
        f"job {first.json().get('id')} submitted twice: {first.status_code}, {again.status_code}"
    )
    s.job_id = first.json().get("id")
    return s


def reset(stack: DevStack, key: str) -> tuple[Scenario, list[str]]:
    """R003 (docs/requirements.md): a forced password reset for a frozen set
    of accounts, with tokens minted at dispatch and never stored."""
    t = stack.tidings
    s = Scenario("password reset", "job:reset:")
    minted: list[str] = []

    def mint(intent: Intent) -> dict[str, str]:
        token = secrets.token_urlsafe(24)
        minted.append(token)
        return {"reset_link": f"https://play.example/reset?token={token}"}

    stack.worker.minters["password_reset"] = mint
    accounts: list[dict[str, Any]] = [
        {"ref": f"player-{i}", "email": f"player{i}@example.com"} for i in range(30)
    ]
    accounts[7]["preferences"] = ["sms"]  # prefers SMS but has no verified number
    t.suppress("email", "player9@example.com", "complaint")
    t.put_contact(
        "player-3", consents=[ConsentRecord("email", "security", "signup", t.clock.now())]
    )
    job = t.create_job(
        idempotency_key=f"reset:frozen-accounts:{stack.run_id}",
        event_class="password_reset",
        purpose="security",
        template="password_reset",
        channels=["email", "sms"],
        audience=accounts,
        token_ttl_seconds=90,
        event_reason="credential stuffing",
        actor="demo",
    )
    s.job_id = job["id"]
    s.notes.append("tokens minted at dispatch, used to render, then forgotten")
    return s, minted


def _next_revision(t: Tidings, report_id: str) -> int:
    with t.db.transaction() as conn:
        return demo_reads.next_report_revision(conn, t.tenant, report_id)


def _post(stack: DevStack, key: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{stack.api_url}{path}", json=body, timeout=10, headers={"Authorization": f"Bearer {key}"}
    )
