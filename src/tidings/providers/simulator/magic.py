"""Magic destinations: force one outcome for one message, whatever the config says.

Tests and demos use these to script a single intent's fate without touching
the global fault rates (which would hit every other message too).

SMS, by the last four digits of `to`:

    ....0000  400 INVALID_DESTINATION (rejected at send)
    ....0009  400 OPTED_OUT (recipient replied STOP)
    ....0422  400 REQUEST_INVALID (our request is malformed)
    ....0451  400 SENDER_REJECTED (our From / sender id refused)
    ....0403  400 ACCOUNT_RESTRICTED (our account is restricted: sandbox,
              whitelist, suspended); it pauses the account (dispatch/backoff.py)
    ....0429  429 with Retry-After (never processed)
    ....0500  500 (never processed, but the client cannot know)
    ....0408  accepted and recorded, then the answer stalls past the client timeout
    ....0001  accepted, later undelivered / UNREACHABLE
    ....0002  accepted, later failed / CARRIER_FILTERED

E-mail, by the local part before any "+tag" (so "bounce+42@x.test" works):

    invalid    400 INVALID_DESTINATION
    optout     400 OPTED_OUT
    badrequest 400 REQUEST_INVALID
    badsender  400 SENDER_REJECTED
    restricted 400 ACCOUNT_RESTRICTED
    ratelimit  429
    error      500
    timeout    accepted, then stalls
    bounce     accepted, later undelivered / BOUNCED (a soft bounce)
    hardbounce accepted, later failed / BOUNCED (suppresses the address)
    fail       accepted, later failed / CONTENT_REJECTED
    blocked    accepted, later failed / SENDER_REJECTED (an ISP's block of the
               sender: Postmark's Blocked bounce, SendGrid's `blocked`
               bounce, which suppress nobody)
    complaint  accepted, delivered, then marked as spam / COMPLAINT, where the
               profile's provider reports it (Postmark's SpamComplaint,
               SendGrid's spamreport, SES's Complaint); elsewhere simply delivered

Anything else is subject to the configured rates. An SMS `to` that is not
6-15 digits (optional "+") or an e-mail without "@" is INVALID_DESTINATION.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["reject", "rate_limit", "error_5xx", "timeout", "final"]


@dataclass(frozen=True)
class Magic:
    kind: Kind
    status: str | None = None  # final status for kind "final"
    code: str | None = None


INVALID = Magic("reject", code="INVALID_DESTINATION")
_OPTED_OUT = Magic("reject", code="OPTED_OUT")
# Refusals of our side, never of the recipient (domain/feedback.py): they
# fail the intent and alert (`provider_refused`), and suppress nobody.
_REQUEST_INVALID = Magic("reject", code="REQUEST_INVALID")
_SENDER_REJECTED = Magic("reject", code="SENDER_REJECTED")
_ACCOUNT_RESTRICTED = Magic("reject", code="ACCOUNT_RESTRICTED")
_RATE_LIMIT = Magic("rate_limit")
_ERROR = Magic("error_5xx")
_TIMEOUT = Magic("timeout")

SMS_SUFFIXES = {
    "0000": INVALID,
    "0009": _OPTED_OUT,
    "0422": _REQUEST_INVALID,
    "0451": _SENDER_REJECTED,
    "0403": _ACCOUNT_RESTRICTED,
    "0429": _RATE_LIMIT,
    "0500": _ERROR,
    "0408": _TIMEOUT,
    "0001": Magic("final", "undelivered", "UNREACHABLE"),
    "0002": Magic("final", "failed", "CARRIER_FILTERED"),
}
EMAIL_LOCAL_PARTS = {
    "invalid": INVALID,
    "optout": _OPTED_OUT,
    "badrequest": _REQUEST_INVALID,
    "badsender": _SENDER_REJECTED,
    "restricted": _ACCOUNT_RESTRICTED,
    "ratelimit": _RATE_LIMIT,
    "error": _ERROR,
    "timeout": _TIMEOUT,
    "bounce": Magic("final", "undelivered", "BOUNCED"),
    "hardbounce": Magic("final", "failed", "BOUNCED"),
    "fail": Magic("final", "failed", "CONTENT_REJECTED"),
    "blocked": Magic("final", "failed", "SENDER_REJECTED"),
    "complaint": Magic("final", "delivered", "COMPLAINT"),
}
_SMS = re.compile(r"\+?\d{6,15}")


def magic_for(channel: str, to: str) -> Magic | None:
    if channel == "sms":
        if not _SMS.fullmatch(to):
            return INVALID
        return SMS_SUFFIXES.get(to[-4:])
    local, at, domain = to.rpartition("@")
    if not at or not local or not domain:
        return INVALID
    return EMAIL_LOCAL_PARTS.get(local.split("+", 1)[0].lower())
