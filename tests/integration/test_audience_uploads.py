"""Uploaded audiences: streamed in as NDJSON, frozen into one job, purged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tidings import IdempotencyConflict, InvalidInput, ManualClock, NotFound, Tidings
from tidings.api.app import create_app
from tidings.api.settings import ApiSettings
from tidings.dispatch.retention import purge

from .api_support import auth, client, count, is_problem, new_key
from .dispatch_helpers import sends, simulator, worker

TENANT = "default"  # the library fixture's tenant, so workers and helpers see the jobs
STAGING = ("audience_uploads", "audience_upload_members")


def members(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "ref": f"reader-{i}",
            "email": f"Reader{i}@Example.com",
            "phone": f"+1415555{1000 + i:04d}",
            "variables": {"seat": i},
        }
        for i in range(start, start + n)
    ]


def ndjson(items: list[dict[str, Any]], chunk: int = 3) -> Iterator[bytes]:
    """A streamed body, a few lines per chunk, split mid-line on purpose."""
    text = "".join(json.dumps(item) + "\n" for item in items).encode()
    size = max(1, len(text) // max(1, len(items) // chunk))
    for at in range(0, len(text), size):
        yield text[at : at + size]


def upload(http: TestClient, key: str, body: Any) -> Any:
    headers = {**auth(key), "Content-Type": "application/x-ndjson"}
    return http.post("/v1/audiences", content=body, headers=headers)


def job_body(upload_id: str | None = None, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotency_key": "report:8421:uploaded",
        "event_class": "report_ready",
        "purpose": "transactional",
        "template": {"name": "report_ready"},
        "channels": ["email"],
        "variables": {"report_name": "Q3 media"},
    }
    if upload_id is not None:
        body["audience_upload"] = upload_id
    body.update(overrides)
    return body


@pytest.fixture
def api(tidings: Tidings) -> tuple[TestClient, str]:
    tidings.publish_template(
        "report_ready",
        channel="email",
        subject="Report {{ report_name }} is ready",
        body="Your report {{ report_name }} is ready.",
        required_variables=["report_name"],
    )
    return client(tidings), new_key(tidings, TENANT)


def rows(db_url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql).fetchall()


def test_an_uploaded_audience_is_frozen_prepared_and_sent(
    tidings: Tidings, clock: ManualClock, api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    tidings.put_contact("known", email="known@example.com", timezone="Europe/Berlin")
    audience = [*members(25), {"ref": "known"}]
    reply = upload(http, key, ndjson(audience))
    assert reply.status_code == 201, reply.text
    uploaded = reply.json()
    assert uploaded["size"] == 26 and uploaded["version"].startswith("sha256:")

    reply = http.post("/v1/jobs", json=job_body(uploaded["id"]), headers=auth(key))
    assert reply.status_code == 202, reply.text
    job_id = reply.json()["id"]
    status = tidings.job(job_id)
    assert (status["audience_size"], status["audience_version"]) == (26, uploaded["version"])
    # the upload is consumed: its staged members are gone, the frozen audience holds them
    assert count(db_url, "audience_upload_members") == 0
    assert count(db_url, "job_recipients") == 26

    tidings.prepare_jobs()
    assert tidings.job(job_id)["counts"] == {"pending": 26}
    core = simulator(clock)
    w = worker(tidings, core)
    while w.dispatch_once():
        pass
    clock.advance(10)
    w.reconcile_once()
    assert tidings.job(job_id)["counts"] == {"delivered": 26}
    assert len(sends(core)) == 26
    refs = [i["recipient_ref"] for i in tidings.job_recipients(job_id, limit=100)["items"]]
    assert refs == [m["ref"] for m in audience]  # the upload's order is the cursor's


def test_an_upload_freezes_what_the_same_inline_audience_freezes(
    tidings: Tidings, api: tuple[TestClient, str], db_url: str
) -> None:
    tidings.put_contact(
        "known", phone="+14155550188", locale="de", preferences={"channels": ["sms"]}
    )
    audience = [
        *members(3),
        {"ref": "known", "variables": {"seat": 9}},
        {"ref": "prefers", "email": "p@example.com", "preferences": ["email"], "locale": "fr"},
    ]
    common = {k: v for k, v in job_body().items() if k != "idempotency_key"}
    inline = tidings.create_job(idempotency_key="inline", audience=audience, **common)
    staged = tidings.upload_audience(audience)
    uploaded = tidings.create_job(idempotency_key="uploaded", audience_upload=staged.id, **common)
    frozen = (
        "SELECT seq, recipient_ref, phone_hash, email_hash, phone_country, email_country,"
        " timezone, locale, preferences, variables FROM job_recipients"
        " WHERE job_id = '{}' ORDER BY seq"
    )
    assert rows(db_url, frozen.format(inline["id"])) == rows(db_url, frozen.format(uploaded["id"]))


def test_a_bad_line_is_named_and_nothing_is_stored(
    api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    lines = [json.dumps(m) for m in members(4)]
    lines.insert(2, "")  # blank lines are skipped but still counted
    lines[3] = json.dumps({"ref": "bad", "phone": "not a number"})
    body = is_problem(upload(http, key, "\n".join(lines).encode()), 422, "INVALID_INPUT")
    assert (body["line"], body["field"]) == (4, "phone")
    assert body["detail"].startswith("line 4:")

    for bad, field in (("{not json", "line"), ('{"ref": "x", "colour": 1}', "colour")):
        body = is_problem(upload(http, key, f"{lines[0]}\n{bad}\n".encode()), 422, "INVALID_INPUT")
        assert (body["line"], body["field"]) == (2, field)
    for table in (*STAGING, "destinations"):
        assert count(db_url, table) == 0


def test_a_ref_given_twice_is_refused_with_the_line_it_came_back(
    api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    audience = [*members(5), members(1, start=1)[0]]
    body = is_problem(upload(http, key, ndjson(audience)), 422, "INVALID_INPUT")
    assert (body["line"], body["field"]) == (6, "ref")
    assert "first at line 2" in body["detail"]
    assert [count(db_url, t) for t in STAGING] == [0, 0]


def test_an_empty_or_mistyped_upload_is_refused(api: tuple[TestClient, str]) -> None:
    http, key = api
    is_problem(upload(http, key, b"\n\n"), 422, "INVALID_INPUT")
    reply = http.post("/v1/audiences", json=members(1), headers=auth(key))  # JSON, not NDJSON
    is_problem(reply, 415, "UNSUPPORTED_MEDIA_TYPE")


def test_an_upload_over_its_limit_is_refused_and_nothing_is_stored(
    tidings: Tidings, db_url: str
) -> None:
    key = new_key(tidings, TENANT)
    app = create_app(tidings, settings=ApiSettings(max_body_bytes=64, max_upload_bytes=2000))
    http = TestClient(app, raise_server_exceptions=False)
    body = b"".join(ndjson(members(40)))
    assert len(body) > 2000
    is_problem(upload(http, key, ndjson(members(40))), 413, "PAYLOAD_TOO_LARGE")
    # far above the JSON limit, within the upload's own
    assert upload(http, key, ndjson(members(5))).status_code == 201
    assert count(db_url, "audience_upload_members") == 5


def test_staged_members_hold_no_raw_destination(
    tidings: Tidings, api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    assert upload(http, key, ndjson(members(3))).status_code == 201
    dump = " ".join(str(r) for t in STAGING for r in rows(db_url, f"SELECT * FROM {t}"))
    for raw in ("reader0@example.com", "Reader0@Example.com", "14155551000"):
        assert raw not in dump
    [(ciphertext, phone_hash)] = rows(
        db_url,
        "SELECT phone_ciphertext, phone_hash FROM audience_upload_members WHERE seq = 1",
    )
    assert tidings.vault.decrypt(ciphertext) == "+14155551000"
    assert phone_hash == tidings.vault.reference("sms", "+14155551000")


def test_an_unknown_upload_is_not_found_for_this_tenant(
    tidings: Tidings, api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    other = new_key(tidings, "other-tenant")
    theirs = upload(http, other, ndjson(members(2))).json()["id"]
    for upload_id in (theirs, "0190a0a0-0000-7000-8000-000000000000"):
        reply = http.post("/v1/jobs", json=job_body(upload_id), headers=auth(key))
        is_problem(reply, 404, "NOT_FOUND")
    assert count(db_url, "jobs") == 0


def test_exactly_one_audience_source(api: tuple[TestClient, str]) -> None:
    http, key = api
    uploaded = upload(http, key, ndjson(members(2))).json()["id"]
    both = job_body(uploaded, audience=members(1))
    body = is_problem(http.post("/v1/jobs", json=both, headers=auth(key)), 422, "INVALID_INPUT")
    assert body["field"] == "audience_upload"
    body = is_problem(
        http.post("/v1/jobs", json=job_body(), headers=auth(key)), 422, "INVALID_INPUT"
    )
    assert body["field"] == "audience"


def test_an_upload_serves_one_job_and_replays_return_it(
    api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    uploaded = upload(http, key, ndjson(members(4))).json()["id"]
    first = http.post("/v1/jobs", json=job_body(uploaded), headers=auth(key))
    assert first.status_code == 202
    again = http.post("/v1/jobs", json=job_body(uploaded), headers=auth(key))
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])

    other_job = job_body(uploaded, idempotency_key="report:8421:second")
    body = is_problem(
        http.post("/v1/jobs", json=other_job, headers=auth(key)), 409, "AUDIENCE_UPLOAD_USED"
    )
    assert first.json()["id"] in body["detail"]

    fresh = upload(http, key, ndjson(members(4))).json()["id"]
    changed = http.post("/v1/jobs", json=job_body(fresh), headers=auth(key))
    is_problem(changed, 409, "IDEMPOTENCY_CONFLICT")
    assert count(db_url, "jobs") == 1
    assert count(db_url, "job_recipients") == 4
    # the refused job did not consume the fresh upload
    assert rows(db_url, f"SELECT job_id FROM audience_uploads WHERE id = '{fresh}'") == [(None,)]


def test_the_library_streams_an_iterable_audience(tidings: Tidings, db_url: str) -> None:
    tidings.publish_template("hello", channel="email", subject="Hi", body="Hello")
    consumed: list[int] = []

    def generate(n: int) -> Iterator[dict[str, Any]]:
        for i in range(n):
            consumed.append(i)
            yield {"ref": f"r{i}", "email": f"r{i}@example.com"}

    def create(audience: Any, key: str = "stream:1") -> dict[str, Any]:
        return tidings.create_job(
            idempotency_key=key,
            event_class="hello",
            purpose="transactional",
            template="hello",
            channels=["email"],
            audience=audience,
        )

    job = create(generate(2500))
    assert len(consumed) == 2500 and job["audience_size"] == 2500
    assert create(generate(2500))["id"] == job["id"]  # same members, same key: a replay
    with pytest.raises(IdempotencyConflict):
        create(generate(2499))
    assert count(db_url, "job_recipients") == 2500
    assert [count(db_url, t) for t in STAGING] == [1, 0]  # the used upload, its members gone

    def broken() -> Iterator[dict[str, Any]]:
        yield from generate(1500)
        yield {"ref": "late", "email": "nope"}

    with pytest.raises(InvalidInput) as error:
        create(broken(), key="stream:2")
    assert error.value.field == "audience[1500].email"
    assert count(db_url, "jobs") == 1
    assert [count(db_url, t) for t in STAGING] == [1, 0]


def test_uploads_expire_and_are_purged(tidings: Tidings, clock: ManualClock, db_url: str) -> None:
    tidings.publish_template("hello", channel="email", subject="Hi", body="Hello")
    unused = tidings.upload_audience(members(3))
    used = tidings.upload_audience(members(2))
    tidings.create_job(
        idempotency_key="used",
        event_class="hello",
        purpose="transactional",
        template="hello",
        channels=["email"],
        audience_upload=used.id,
    )
    purge(tidings.db, clock.now())
    assert [count(db_url, t) for t in STAGING] == [2, 3]
    clock.advance(25 * 3600)
    with pytest.raises(NotFound, match="unknown, or expired"):
        tidings.create_job(
            idempotency_key="late",
            event_class="hello",
            purpose="transactional",
            template="hello",
            channels=["email"],
            audience_upload=unused.id,
        )
    purge(tidings.db, clock.now())
    assert [count(db_url, t) for t in STAGING] == [0, 0]
    assert count(db_url, "job_recipients") == 2  # the job's frozen audience is not the upload's


@pytest.mark.parametrize("after", ["³", "١٢", "-1", "x"])
def test_a_recipient_cursor_that_is_not_ascii_digits_is_refused(
    api: tuple[TestClient, str], after: str
) -> None:
    """Found by schemathesis: "³" is a digit to `str.isdigit` but not to `int`."""
    http, key = api
    job = http.post("/v1/jobs", json=job_body(upload(http, key, ndjson(members(2))).json()["id"]),
                    headers=auth(key)).json()["id"]  # fmt: skip
    reply = http.get(f"/v1/jobs/{job}/recipients", params={"after": after}, headers=auth(key))
    assert reply.status_code == 422
    assert reply.json()["field"] == "after"
