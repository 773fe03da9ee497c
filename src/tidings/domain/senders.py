"""Which number each tenant sends SMS from, per provider account, and so
whose opt-out an inbound STOP is.

Carriers and providers enforce STOP per sender number: Twilio blocks
further messages "from that Twilio number" to the recipient who replied
STOP (https://www.twilio.com/help/faq/sms/does-twilio-support-stop-block-
and-cancel-aka-sms-filtering; with a Messaging Service, the service's whole
pool), AWS End User Messaging applies the opt-out list associated with the
originating number, Vonage refuses messages to a recipient who opted out of
"the number you are sending from" (err-code 9); links in docs/security.md.
So an inbound message is about the tenants that send from the number it
was sent to, on the account it came through: all of them (the provider
blocks the number for each), and no other.

Configured by the operator (`TIDINGS_SENDER_NUMBERS`), never by a tenant:
a tenant that could name a number would send as another tenant and
receive its STOPs. Tenants not named send from the adapter's own sender
(`TIDINGS_<PROVIDER>_FROM`, or its Messaging Service); inbound messages to
a number nobody is named with go to TIDINGS_INBOUND_TENANT as before,
unless that tenant has a number of its own on the account (then the STOP
is not about its texts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tidings.domain.errors import InvalidInput

# E.164 (a plus and up to 15 digits) or a short code (3 to 8 digits).
_NUMBER = re.compile(r"^(\+[1-9]\d{6,14}|\d{3,8})$")
_SEPARATORS = re.compile(r"[\s().-]")


def sender_number(raw: str) -> str:
    """A sender number compared as the providers write it: E.164, or a
    short code, without spaces, dots, dashes or parentheses."""
    number = _SEPARATORS.sub("", raw)
    if not _NUMBER.match(number):
        raise InvalidInput("sender_number", "not an E.164 number or a short code")
    return number


@dataclass(frozen=True)
class SenderNumbers:
    """account -> tenant -> the number that tenant sends from on it."""

    by_account: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, Mapping[str, str]]) -> SenderNumbers:
        return cls(
            {
                account: {tenant: sender_number(number) for tenant, number in tenants.items()}
                for account, tenants in raw.items()
            }
        )

    def number(self, account: str, tenant: str) -> str | None:
        """The number `tenant` sends from on `account`; None: the adapter's own."""
        return self.by_account.get(account, {}).get(tenant)

    def tenants(self, account: str, to: str | None, fallback: str) -> list[str]:
        """The tenants an inbound message sent to `to` on `account` is for."""
        named = self.by_account.get(account, {})
        if to is not None:
            try:
                number = sender_number(to)
            except InvalidInput:
                number = None
            found = sorted(t for t, n in named.items() if n == number)
            if found:
                return found
            if fallback in named:
                return []  # the fallback sends from its own number, not this one
        return [fallback]
