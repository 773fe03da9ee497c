"""Issue #20 item 11: hostile input answers 4xx, never a 500, and commits
nothing; attachment downloads are bounded; secret files are private.

Each of these answered 500 (or hung a worker) before its fix. They go
through the real FastAPI app over the test database, and the real worker
for attachments.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration.api_support import auth, client, count, intent_body, new_key, publish_offer
from tests.integration.dispatch_helpers import simulator, worker
from tidings import InvalidInput, ManualClock, Tidings
from tidings.platform.vault import local_secret


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def problem_422(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = answer.json()
    assert body["code"] == "INVALID_INPUT"
    return body


# --- 500s that must be 4xx -------------------------------------------------------


def test_a_cursor_of_5000_digits_is_invalid_input(tidings: Tidings) -> None:
    key = new_key(tidings, "acme")
    answer = client(tidings).get(
        "/v1/jobs/x/recipients", params={"after": "9" * 5000}, headers=auth(key)
    )
    assert problem_422(answer)["field"] == "after"


def test_a_nul_in_a_contact_ref_is_invalid_input_and_stores_nothing(
    tidings: Tidings, db_url: str
) -> None:
    key = new_key(tidings, "acme")
    api = client(tidings)
    problem_422(api.put("/v1/contacts/member%001", json={}, headers=auth(key)))
    problem_422(
        api.post("/v1/contacts/member%001/opt-out", json={"channel": "sms"}, headers=auth(key))
    )
    assert count(db_url, "contacts") == 0


@pytest.mark.parametrize(
    "field",
    ["timezone", "locale", "phone", "email"],
)
def test_a_nul_in_any_contact_field_is_invalid_input(
    tidings: Tidings, db_url: str, field: str
) -> None:
    key = new_key(tidings, "acme")
    answer = client(tidings).put("/v1/contacts/m1", json={field: "x\x00y"}, headers=auth(key))
    problem_422(answer)
    assert count(db_url, "contacts") == 0


def test_a_nul_anywhere_in_an_intent_is_invalid_input(tidings: Tidings, db_url: str) -> None:
    key = new_key(tidings, "acme")
    publish_offer(tidings, "acme")
    api = client(tidings)
    bad_bodies = [
        intent_body(tidings, idempotency_key="k\x00"),
        intent_body(tidings, event_class="offer\x00"),
        intent_body(tidings, correlation_id="c\x00"),
        intent_body(tidings, recipient={"ref": "m\x00", "phone": "+14155550123"}),
        intent_body(tidings, variables={"class_name": "Spin\x00", "deadline": "18:00"}),
        intent_body(tidings, variables={"k\x00": "v"}),
    ]
    for body in bad_bodies:
        problem_422(api.post("/v1/intents", json=body, headers=auth(key)))
    assert count(db_url, "intents") == 0


def test_the_library_refuses_nul_before_the_database_does(tidings: Tidings) -> None:
    t = tidings.for_tenant("acme")
    with pytest.raises(InvalidInput):
        t.put_contact("member\x001")
    with pytest.raises(InvalidInput):
        t.put_contact("m1", preferences={"quiet": "a\x00"})
    t.publish_template("offer", channel="sms", body="A spot opened.")
    with pytest.raises(InvalidInput):
        t.notify(
            idempotency_key="k1",
            channel="sms",
            recipient={"ref": "m\x001", "phone": "+14155550123"},
            template="offer",
            purpose="transactional",
            event_class="offer",
        )
    job = {
        "idempotency_key": "j1",
        "event_class": "offer",
        "purpose": "transactional",
        "template": "offer",
        "channels": ["sms"],
        "audience": [{"ref": "m1", "phone": "+14155550123"}],
    }
    for bad in (
        {"event_reason": "why\x00"},
        {"variables": {"v": "\x00"}},
        {"audience": [{"ref": "m\x001", "phone": "+14155550123"}]},
        {"audience": [{"ref": "m1", "phone": "+14155550123", "variables": nested(40)}]},
    ):
        with pytest.raises(InvalidInput):
            t.create_job(**{**job, **bad})


def test_preferences_nested_900_deep_are_refused_and_not_stored(
    tidings: Tidings, db_url: str
) -> None:
    # Before: stored, then the answer could not be serialized (500), and
    # every later read of the contact failed the same way.
    key = new_key(tidings, "acme")
    answer = client(tidings).put(
        "/v1/contacts/m1", json={"preferences": nested(900)}, headers=auth(key)
    )
    assert problem_422(answer)["field"] == "preferences"
    assert count(db_url, "contacts") == 0


@pytest.mark.parametrize("value", [nested(900), nested_list(900), nested(33)])
def test_every_free_form_json_field_is_bounded_in_depth(
    tidings: Tidings, db_url: str, value: Any
) -> None:
    key = new_key(tidings, "acme")
    publish_offer(tidings, "acme")
    api = client(tidings)
    body = intent_body(tidings, variables={"class_name": "x", "deadline": "y", "deep": value})
    assert problem_422(api.post("/v1/intents", json=body, headers=auth(key)))["field"] == (
        "variables"
    )
    job = {
        "idempotency_key": "j1",
        "event_class": "offer",
        "purpose": "transactional",
        "template": {"name": "waitlist_offer"},
        "channels": ["sms"],
        "audience": [{"ref": "m1", "phone": "+14155550123", "variables": {"deep": value}}],
    }
    problem_422(api.post("/v1/jobs", json=job, headers=auth(key)))
    problem_422(api.post("/v1/jobs", json={**job, "variables": {"deep": value}}, headers=auth(key)))
    problem_422(api.post("/v1/policies", json={"deep": value}, headers=auth(key)))
    assert count(db_url, "intents") == count(db_url, "jobs") == 0


def test_free_form_json_is_bounded_in_size(tidings: Tidings) -> None:
    key = new_key(tidings, "acme")
    answer = client(tidings).put(
        "/v1/contacts/m1", json={"preferences": {"x": "y" * 70_000}}, headers=auth(key)
    )
    assert problem_422(answer)["field"] == "preferences"


def test_honest_nesting_still_works(tidings: Tidings) -> None:
    key = new_key(tidings, "acme")
    answer = client(tidings).put(
        "/v1/contacts/m1", json={"preferences": nested(20)}, headers=auth(key)
    )
    assert answer.status_code == 200, answer.text


# --- attachment downloads are bounded -------------------------------------------


class _Endless(BaseHTTPRequestHandler):
    """A report URL that never ends and declares no length."""

    served = 0

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/pdf")
        self.end_headers()
        chunk = b"x" * 65_536
        try:
            for _ in range(16_384):  # 1 GiB at most, if nothing stopped reading
                self.wfile.write(chunk)
                type(self).served += len(chunk)
        except OSError:
            pass  # the worker hung up: what the limit is for

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endless_url() -> Iterator[str]:
    _Endless.served = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/report.pdf"
    finally:
        server.shutdown()
        server.server_close()


def _report_job(t: Tidings, location: str) -> None:
    t.publish_template(
        "report_ready",
        channel="email",
        subject="Your report",
        body="Your report is attached.",
        attachment_policy="required",
    )
    t.register_report("r1", 1, filename="r.pdf", content_type="application/pdf", location=location)
    t.create_job(
        idempotency_key="report:r1",
        event_class="report_ready",
        purpose="transactional",
        template="report_ready",
        channels=["email"],
        audience=[{"ref": "reader-1", "email": "reader1@example.com"}],
        report={"id": "r1", "revision": 1},
    )
    t.prepare_jobs()


def _attempts(db_url: str) -> list[tuple[str, str | None]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT state, code FROM attempts").fetchall()
    return [(r[0], r[1]) for r in rows]


def _intent(db_url: str) -> tuple[str, str | None]:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT state, decision_code FROM intents").fetchone()
    assert row is not None
    return row[0], row[1]


def test_an_endless_attachment_url_fails_the_send_and_is_not_retried(
    tidings: Tidings,
    clock: ManualClock,
    db_url: str,
    endless_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIDINGS_MAX_ATTACHMENT_BYTES", str(1024 * 1024))
    _report_job(tidings, endless_url)
    core = simulator(clock)
    w = worker(tidings, core)
    assert w.dispatch_once("email") == 1
    assert _Endless.served < 16 * 1024 * 1024  # stopped soon after the limit
    assert core.ledger() == []  # nothing reached the provider
    assert _attempts(db_url) == [("failed", "ATTACHMENT_TOO_LARGE")]
    assert _intent(db_url)[0] == "failed"
    clock.advance(3600)
    assert w.dispatch_once("email") == 0  # terminal: no retry, ever


def test_an_oversize_attachment_file_fails_the_send(
    tidings: Tidings,
    clock: ManualClock,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIDINGS_MAX_ATTACHMENT_BYTES", "1000")
    big = tmp_path / "big.pdf"
    big.write_bytes(b"x" * 1001)
    _report_job(tidings, str(big))
    w = worker(tidings, simulator(clock))
    assert w.dispatch_once("email") == 1
    assert _attempts(db_url) == [("failed", "ATTACHMENT_TOO_LARGE")]
    assert _intent(db_url)[0] == "failed"


# --- secret files are private ---------------------------------------------------


def _private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("permissive_umask")
def test_the_generated_secret_key_file_is_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    local_secret(home)
    assert _private(home / "secret.key")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_a_secret_key_file_left_readable_is_narrowed(tmp_path: Path) -> None:
    (tmp_path / "secret.key").write_text("an-old-trial-key")
    os.chmod(tmp_path / "secret.key", 0o644)
    assert local_secret(tmp_path) == "an-old-trial-key"
    assert _private(tmp_path / "secret.key")


@pytest.mark.usefixtures("permissive_umask")
def test_the_demo_log_is_private_new_or_old(tmp_path: Path) -> None:
    from tidings.demo.run import open_log

    with open_log(tmp_path / "new") as log:
        log.write("line\n")
    assert _private(tmp_path / "new" / "demo.log")
    old = tmp_path / "old"
    old.mkdir()
    (old / "demo.log").write_text("before\n")
    os.chmod(old / "demo.log", 0o644)
    with open_log(old) as log:
        log.write("after\n")
    assert _private(old / "demo.log")
    assert (old / "demo.log").read_text() == "before\nafter\n"
