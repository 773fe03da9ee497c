"""Uploaded audiences as CSV: a header row, then one recipient per row."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tidings import ManualClock, Tidings
from tidings.api.app import create_app
from tidings.policies import builtin_document
from tidings.providers.simulator.records import destination_hash

from .api_support import auth, client, count, is_problem, new_key
from .dispatch_helpers import sends, simulator, worker

TENANT = "default"
STAGING = ("audience_uploads", "audience_upload_members")


@pytest.fixture
def api(tidings: Tidings) -> tuple[TestClient, str]:
    tidings.publish_template(
        "seat_ready",
        channel="email",
        subject="Seat {{ seat }}",
        body="Hello {{ name }}, your seat is {{ seat }}.",
        required_variables=["name", "seat"],
    )
    tidings.publish_template(
        "seat_ready",
        channel="sms",
        body="Hello {{ name }}, seat {{ seat }}.",
        required_variables=["name", "seat"],
    )
    return client(tidings), new_key(tidings, TENANT)


def upload(http: TestClient, key: str, body: Any, media: str = "text/csv") -> Any:
    return http.post("/v1/audiences", content=body, headers={**auth(key), "Content-Type": media})


def chunked(text: str, size: int = 7) -> Iterator[bytes]:
    """A streamed body in small chunks, cut mid-row and mid-character."""
    data = text.encode()
    for at in range(0, len(data), size):
        yield data[at : at + size]


def staged(db_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT recipient_ref, phone_hash IS NOT NULL, email_hash IS NOT NULL, timezone,"
            " locale, preferences, variables FROM audience_upload_members ORDER BY seq"
        ).fetchall()


def variables(name: str, seat: str, column: str = "name") -> dict[str, str]:
    return {column: name, "seat": seat}


def job_body(upload_id: str, channels: list[str], **overrides: Any) -> dict[str, Any]:
    return {
        "idempotency_key": f"seats:{upload_id}",
        "event_class": "seat_ready",
        "purpose": "transactional",
        "template": {"name": "seat_ready"},
        "channels": channels,
        "audience_upload": upload_id,
        **overrides,
    }


def send_all(tidings: Tidings, clock: ManualClock, job_id: str) -> list[dict[str, Any]]:
    tidings.prepare_jobs()
    core = simulator(clock)
    w = worker(tidings, core)
    while w.dispatch_once():
        pass
    clock.advance(10)
    w.reconcile_once()
    return sends(core)


CSV = (
    "ref,email,phone,timezone,locale,preferences,name,seat\n"
    "reader-1,Reader1@Example.com,,Europe/Berlin,de,,Ada,4\n"
    "reader-2,reader2@example.com,+14155550101,,,email,Grace,5\n"
    'reader-3,reader3@example.com,,,,"sms, email","Hopper, G.",6\n'
)


def test_a_csv_audience_is_uploaded_frozen_and_sent(
    tidings: Tidings, clock: ManualClock, api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    reply = upload(http, key, chunked(CSV))
    assert reply.status_code == 201, reply.text
    uploaded = reply.json()
    assert uploaded["size"] == 3
    ada, grace, hopper = ("Ada", "4"), ("Grace", "5"), ("Hopper, G.", "6")
    assert staged(db_url) == [
        ("reader-1", False, True, "Europe/Berlin", "de", [], variables(*ada)),
        ("reader-2", True, True, None, None, ["email"], variables(*grace)),
        ("reader-3", False, True, None, None, ["sms", "email"], variables(*hopper)),
    ]
    reply = http.post("/v1/jobs", json=job_body(uploaded["id"], ["email"]), headers=auth(key))
    assert reply.status_code == 202, reply.text
    job_id = reply.json()["id"]
    sent = send_all(tidings, clock, job_id)
    assert tidings.job(job_id)["counts"] == {"delivered": 3}
    readers = ("Reader1@example.com", "reader2@example.com", "reader3@example.com")
    assert sorted(s["destination_hash"] for s in sent) == sorted(map(destination_hash, readers))


def test_notify_column_names_and_rows_without_a_ref(
    tidings: Tidings, clock: ManualClock, api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    body = "Phone Number,name,seat\n+14155550101,Ada,4\n+14155550102,Grace,5\n"
    reply = upload(http, key, body.encode(), media="application/csv")
    assert reply.status_code == 201, reply.text
    # a row with no ref is named by its row in the spreadsheet (the header is row 1)
    assert [row[:3] for row in staged(db_url)] == [("row-2", True, False), ("row-3", True, False)]
    upload_id = reply.json()["id"]
    reply = http.post("/v1/jobs", json=job_body(upload_id, ["sms"]), headers=auth(key))
    assert reply.status_code == 202, reply.text
    job_id = reply.json()["id"]
    assert len(send_all(tidings, clock, job_id)) == 2
    assert tidings.job(job_id)["counts"] == {"delivered": 2}

    body = "email address,Name,seat\nada@example.com,Ada,4\n"
    assert upload(http, key, body.encode()).status_code == 201
    assert staged(db_url)[-1] == (
        "row-2",
        False,
        True,
        None,
        None,
        [],
        variables("Ada", "4", "Name"),
    )


def test_bom_crlf_quoted_commas_and_newlines_empty_cells_and_formulas(
    api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    body = (
        "\ufeffref,email,note,seat\r\n"
        'r1,r1@example.com,"line one\r\nline two, with a comma",\r\n'
        "\r\n"  # a blank line is skipped
        ",,,\r\n"  # so is a row of empty cells (spreadsheets export them)
        'r2,r2@example.com,"=cmd|\' /C calc\'!A0","say ""hi"""\r\n'
    )
    reply = upload(http, key, chunked(body, size=5))
    assert reply.status_code == 201, reply.text
    assert reply.json()["size"] == 2
    rows = staged(db_url)
    assert rows[0][6] == {"note": "line one\r\nline two, with a comma"}  # the empty seat is absent
    # stored as the text it is: nothing is evaluated, and tidings writes no CSV
    assert rows[1][6] == {"note": "=cmd|' /C calc'!A0", "seat": 'say "hi"'}


def test_every_bad_row_is_named_with_its_column_and_nothing_is_stored(
    api: tuple[TestClient, str], db_url: str
) -> None:
    http, key = api
    body = (
        "ref,phone number,email address,timezone\n"
        "r1,+14155550101,,\n"
        "r2,not a number,nope,Mars/Olympus\n"
        'r3,"+1415\n5550103",,\n'  # a quoted newline: r3 starts at line 4
        "r4,+14155550104,,,extra\n"
        ",,,\n"
        ",,,Europe/Paris\n"
    )
    found = is_problem(upload(http, key, chunked(body)), 422, "INVALID_INPUT")
    assert (found["line"], found["field"]) == (3, "phone number")
    assert found["detail"].startswith("line 3:")
    errors = [(e["line"], e["field"]) for e in found["errors"]]
    assert errors == [
        (3, "phone number"),
        (3, "email address"),
        (3, "timezone"),
        (4, "phone number"),
        (6, "column 5"),
        (8, "ref"),
    ]
    for table in (*STAGING, "destinations"):
        assert count(db_url, table) == 0


def test_errors_are_listed_up_to_a_bound(api: tuple[TestClient, str], db_url: str) -> None:
    http, key = api
    body = "ref,phone\n" + "".join(f"r{n},bad\n" for n in range(500))
    found = is_problem(upload(http, key, body.encode()), 422, "INVALID_INPUT")
    assert len(found["errors"]) == 100
    assert found["errors"][-1]["line"] == 101
    assert count(db_url, "audience_upload_members") == 0


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ("reader-1,reader1@example.com\n", "header", "header row"),
        ("ref,email,Email\nr1,a@example.com,b@example.com\n", "Email", "twice"),
        ("ref,seat,seat\nr1,1,2\n", "seat", "twice"),
        ("ref," + ",".join(f"v{n}" for n in range(200)) + "\nr1\n", "header", "columns"),
        ("ref,,email\nr1,x,a@example.com\n", "column 2", "no name"),
        ("ref,email\n", "audience", "at least one"),
    ],
)
def test_a_bad_header_or_an_empty_audience_is_refused(
    api: tuple[TestClient, str], db_url: str, body: str, field: str, message: str
) -> None:
    http, key = api
    found = is_problem(upload(http, key, body.encode()), 422, "INVALID_INPUT")
    assert found["field"] == field
    assert message in found["detail"]
    assert count(db_url, "audience_upload_members") == 0


def test_hostile_csv_is_refused_early(api: tuple[TestClient, str], db_url: str) -> None:
    http, key = api
    huge = 'ref,note\nr1,"' + "x" * 200_000 + '"\n'
    found = is_problem(upload(http, key, chunked(huge, size=4096)), 422, "INVALID_INPUT")
    assert found["line"] == 2
    unclosed = 'ref,note\nr1,"never closed\n' + "r2,more\n" * 20_000
    found = is_problem(upload(http, key, chunked(unclosed, size=4096)), 422, "INVALID_INPUT")
    assert found["line"] == 2
    found = is_problem(upload(http, key, b"ref,email\nr1,\xff\xfe\n"), 422, "INVALID_INPUT")
    assert (found["line"], "UTF-8" in found["detail"]) == (2, True)
    found = is_problem(upload(http, key, b'ref,email\nr1,"a"b\n'), 422, "INVALID_INPUT")
    assert found["line"] == 2
    assert count(db_url, "audience_upload_members") == 0


def test_only_utf8_csv_is_accepted(api: tuple[TestClient, str]) -> None:
    http, key = api
    reply = upload(http, key, b"ref,email\nr1,a@example.com\n", "text/csv; charset=latin-1")
    is_problem(reply, 415, "UNSUPPORTED_MEDIA_TYPE")
    reply = upload(http, key, b"ref,email\nr1,a@example.com\n", "text/csv; charset=UTF-8")
    assert reply.status_code == 201, reply.text


def test_the_openapi_document_offers_both_formats(tidings: Tidings) -> None:
    document = create_app(tidings).openapi()
    content = document["paths"]["/v1/audiences"]["post"]["requestBody"]["content"]
    assert set(content) == {"application/x-ndjson", "text/csv"}


def test_a_csv_job_falls_back_to_email_where_the_policy_allows(
    tidings: Tidings, clock: ManualClock, api: tuple[TestClient, str]
) -> None:
    # Issue 40: a recipient of an ["sms", "email"] job with only an e-mail
    # address gets nothing in `preferred` mode, and the e-mail in
    # `first_available` once the policy allows it.
    http, key = api
    body = "phone number,email address,name,seat\n+14155550101,,Ada,4\n,b@example.com,Bo,5\n"
    refused = job_body(upload(http, key, body.encode()).json()["id"], ["sms", "email"])
    refused["channel_mode"] = "first_available"
    found = is_problem(http.post("/v1/jobs", json=refused, headers=auth(key)), 422, "INVALID_INPUT")
    assert found["field"] == "channel_mode"

    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc["version"] = "fallback"
    doc["purposes"]["transactional"]["channel_fallback"] = True
    tidings.publish_policy(doc)
    reply = http.post("/v1/jobs", json=refused, headers=auth(key))
    assert reply.status_code == 202, reply.text
    job_id = reply.json()["id"]
    sent = send_all(tidings, clock, job_id)
    assert sorted(s["channel"] for s in sent) == ["email", "sms"]
    assert tidings.job(job_id)["counts"] == {"delivered": 2}
