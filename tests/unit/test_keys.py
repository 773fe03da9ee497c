"""The shape of the keys that name an audience-facing intent (seed 002's
`report:8421:revision:7:email`, seed 003's job, recipient and channel):
deterministic, so the same queue item twice is one intent, and distinct
wherever the intent differs (R002.14, R003.16, docs/requirements.md)."""

from __future__ import annotations

from uuid import UUID

from tidings.domain.keys import attempt_key, intent_of_attempt_key, job_recipient_key, report_key

JOB = UUID("0190f7e2-0000-7000-8000-000000000001")
OTHER_JOB = UUID("0190f7e2-0000-7000-8000-000000000002")


def test_a_reports_key_names_its_id_revision_and_channel() -> None:
    assert report_key("8421", 7, "email") == "report:8421:revision:7:email"
    assert report_key("8421", "7", "email") == report_key("8421", 7, "email")
    assert report_key("8421", 8, "email") != report_key("8421", 7, "email")
    assert report_key("8421", 7, "sms") != report_key("8421", 7, "email")


def test_a_job_recipients_key_is_the_same_each_time_and_differs_by_each_part() -> None:
    key = job_recipient_key(JOB, "player-1", "email")
    assert key == job_recipient_key(str(JOB), "player-1", "email") == f"job:{JOB}:player-1:email"
    others = {
        job_recipient_key(OTHER_JOB, "player-1", "email"),
        job_recipient_key(JOB, "player-2", "email"),
        job_recipient_key(JOB, "player-1", "sms"),
        key,
    }
    assert len(others) == 4


def test_a_report_jobs_recipient_key_carries_the_report_revision_and_channel() -> None:
    email = job_recipient_key(JOB, "reader-1", "email", report_key("8421", 7, "email"))
    assert email == f"job:{JOB}:report:8421:revision:7:email:reader-1"
    assert email != job_recipient_key(JOB, "reader-1", "sms", report_key("8421", 7, "sms"))
    assert email != job_recipient_key(JOB, "reader-1", "email", report_key("8421", 8, "email"))


def test_an_attempt_key_is_derived_from_the_intent_and_read_back() -> None:
    key = attempt_key(JOB, 2)
    assert key == f"tdg:{JOB}:2" and intent_of_attempt_key(key) == JOB
    assert intent_of_attempt_key("report:8421:revision:7:email:attempt:2") is None
