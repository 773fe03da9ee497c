"""What a receipt teaches: unsubscribes, complaints and hard bounces block; soft bounces do not."""

from __future__ import annotations

import pytest

from tidings.domain.feedback import OPT_OUT, Lesson, lesson


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
