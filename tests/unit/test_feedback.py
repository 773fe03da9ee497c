"""What a receipt teaches: unsubscribes, complaints and hard bounces block; soft bounces do not."""

from __future__ import annotations

import pytest

from tidings.domain.feedback import OPT_OUT, Lesson, fault, lesson, refusal_alert_key, send_lesson


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        ("delivered", "OPTED_OUT", OPT_OUT),  # an unsubscribe after delivery
        ("failed", "OPTED_OUT", OPT_OUT),  # Twilio 21610, Vonage err-code 4
        ("delivered", "COMPLAINT", Lesson("suppression", "complaint")),
        ("failed", "BOUNCED", Lesson("suppression", "hard_bounce")),
        ("undelivered", "BOUNCED", None),  # a soft bounce: a later resend may pass
        ("undelivered", "UNREACHABLE", None),
        ("delivered", None, None),
        ("accepted", None, None),
    ],
)
def test_lesson(status: str, code: str | None, expected: Lesson | None) -> None:
    assert lesson(status, code) == expected


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("failed", "REQUEST_INVALID"),
        ("failed", "SENDER_REJECTED"),
        ("failed", "ACCOUNT_RESTRICTED"),
        ("failed", "AUTH_FAILED"),
        ("failed", "CONTENT_REJECTED"),
        ("failed", "SOMETHING_NEW"),  # unrecognised: never blocks
    ],
)
def test_a_fact_about_our_side_blocks_nobody(status: str, code: str) -> None:
    assert lesson(status, code) is None
    assert send_lesson(code) is None
    assert fault(code) != "recipient"


def test_a_report_about_the_address_alone_still_blocks_it() -> None:
    # Postmark SubscriptionChange: a suppression with its reason, about no message.
    assert lesson("unknown", "BOUNCED") == Lesson("suppression", "hard_bounce")
    assert lesson("unknown", "COMPLAINT") == Lesson("suppression", "complaint")


def test_send_time_lessons() -> None:
    assert send_lesson("OPTED_OUT") == OPT_OUT
    assert send_lesson("INVALID_DESTINATION") == Lesson("suppression", "invalid")


def test_our_refusals_raise_an_alert_named_by_channel_account_and_code() -> None:
    assert (
        refusal_alert_key("sms", "twilio", "ACCOUNT_RESTRICTED")
        == "provider_refused:sms:twilio:ACCOUNT_RESTRICTED"
    )
    assert refusal_alert_key("email", "ses", "BOUNCED") is None
