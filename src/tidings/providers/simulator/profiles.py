"""What each real provider offers, for the simulator to offer exactly that.

The guarantees about crashes and unknown outcomes must hold with real
providers, and no real provider can look a message up by our idempotency
key (DESIGN.md invariant 3). So the simulator plays one provider at a time
(`tidings simulator --profile NAME`, `PUT /_config {"profile": NAME}`):

* which lookups exist: by the provider's message id, by its list search
  (messages to one destination sent in a time range, as Twilio's Messages
  list filtered by `To` and `DateSent`), by a reference of ours it stores
  (Postmark's `metadata_` search), by our key (`ideal` only), or none;
* whether a repeated idempotency key is honoured (the first message comes
  back, nothing new is sent) or ignored (a second message goes out);
* whether receipts are pushed at all, and where they carry our reference:
  a field of the event (SendGrid `custom_args`, Vonage `client-ref`, AWS
  `Context`, SES tags, Postmark `Metadata`), the query of the callback URL
  (Twilio's StatusCallback), or nowhere;
* the raw status and code vocabulary of its receipts and lookups, which
  the simulator adapter reads with the real adapter's own mapping.

The table with the sources behind each row is in docs/providers.md,
"What each provider offers for reconciliation". A profile plays the
provider of its name in the catalog (`tidings.providers.catalog`), which
gives it its channels and names the adapter whose protocol it imitates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from tidings.providers.catalog import BOTH, EMAIL, PROVIDERS, SMS, Provider

# The simulator's own outcomes: a status and, for failures, a normalized code.
Outcome = tuple[str, str | None]
# What the provider calls it: a raw status and a raw code.
Raw = tuple[str, str | None]


class Echo(StrEnum):
    """Where a receipt carries the reference we sent."""

    FIELD = "field"  # a field of the event body, named by `reference_field`
    CALLBACK_QUERY = "callback_query"  # the query string of the URL it is POSTed to
    NONE = "none"  # nowhere: receipts name the provider's message id only


@dataclass(frozen=True)
class Profile:
    name: str
    channels: frozenset[str]
    lookup_by_id: frozenset[str]  # channels whose messages can be fetched by id
    lookup_by_key: bool = False
    list_search: bool = False
    reference_search: bool = False
    honours_idempotency: bool = False
    receipts: bool = True
    echo: Echo = Echo.FIELD
    reference_field: str = "reference"
    # Stages the provider reports, each in its own words. A stage it never
    # reports ("sent" for Postmark) is absent: no receipt is pushed for it.
    vocabulary: Mapping[Outcome, Raw] = field(default_factory=dict)
    # How long after it was accepted a message shows in a list or reference
    # search: real searches are eventually consistent.
    search_visible_after_ms: float = 0.0
    native: bool = False  # the simulator's own words: statuses and codes pass through

    @property
    def provider(self) -> Provider | None:
        """The catalog's provider this profile plays (None for `ideal`)."""
        return PROVIDERS.get(self.name)

    def raw(self, status: str, code: str | None) -> Raw | None:
        """The provider's words for a stage, or None if it never reports it."""
        if self.native:
            return status, code
        return self.vocabulary.get((status, code)) or self.vocabulary.get((status, None))

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "channels": sorted(self.channels),
            "lookup_by_id": sorted(self.lookup_by_id),
            "lookup_by_key": self.lookup_by_key,
            "list_search": self.list_search,
            "reference_search": self.reference_search,
            "honours_idempotency": self.honours_idempotency,
            "receipts": self.receipts,
            "echo": self.echo.value,
            "reference_field": self.reference_field,
            "search_visible_after_ms": self.search_visible_after_ms,
        }


def _plays(name: str) -> frozenset[str]:
    """The channels of the catalog's provider `name`."""
    return PROVIDERS[name].channels


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "ideal",
            BOTH,
            lookup_by_id=BOTH,
            lookup_by_key=True,
            echo=Echo.FIELD,
            reference_field="idempotency_key",
            native=True,
        ),
        Profile(
            "twilio",
            _plays("twilio"),
            lookup_by_id=SMS,
            list_search=True,
            echo=Echo.CALLBACK_QUERY,
            reference_field="tidings_attempt",
            vocabulary={
                ("queued", None): ("queued", None),
                ("sent", None): ("sent", None),
                ("delivered", None): ("delivered", None),
                ("undelivered", "UNREACHABLE"): ("undelivered", "30003"),
                ("undelivered", None): ("undelivered", "30008"),
                ("failed", "CARRIER_FILTERED"): ("failed", "30007"),
                ("failed", None): ("failed", "30008"),
            },
            search_visible_after_ms=1_000.0,
        ),
        Profile(
            "aws_sms",
            _plays("aws_sms"),
            lookup_by_id=frozenset(),
            reference_field="context",
            vocabulary={
                ("queued", None): ("TEXT_PENDING", None),
                ("sent", None): ("TEXT_QUEUED", None),
                ("delivered", None): ("TEXT_DELIVERED", None),
                # The AWS adapter reads a failure's event type as its code too.
                ("undelivered", "UNREACHABLE"): (
                    "TEXT_CARRIER_UNREACHABLE",
                    "TEXT_CARRIER_UNREACHABLE",
                ),
                # Not TEXT_UNKNOWN: AWS's "we do not know" is no non-delivery.
                ("undelivered", None): ("TEXT_TTL_EXPIRED", "TEXT_TTL_EXPIRED"),
                ("failed", "CARRIER_FILTERED"): ("TEXT_BLOCKED", "TEXT_BLOCKED"),
                ("failed", None): ("TEXT_INVALID", "TEXT_INVALID"),
            },
        ),
        Profile(
            "sns",
            _plays("sns"),
            lookup_by_id=frozenset(),
            receipts=False,  # delivery status goes to CloudWatch Logs only
            echo=Echo.NONE,
            native=True,
        ),
        Profile(
            "vonage",
            _plays("vonage"),
            lookup_by_id=frozenset(),
            reference_field="client-ref",
            vocabulary={
                ("queued", None): ("accepted", None),
                ("sent", None): ("buffered", None),
                ("delivered", None): ("delivered", None),
                ("undelivered", "UNREACHABLE"): ("failed", "2"),
                ("undelivered", None): ("expired", "1"),
                ("failed", "CARRIER_FILTERED"): ("rejected", "6"),
                ("failed", None): ("failed", "99"),
            },
        ),
        Profile(
            "ses",
            _plays("ses"),
            lookup_by_id=frozenset(),
            reference_field="tags",
            vocabulary={
                ("queued", None): ("Send", None),
                ("delivered", None): ("Delivery", None),
                ("delivered", "COMPLAINT"): ("Complaint", "Complaint"),
                ("undelivered", "BOUNCED"): ("Bounce", "Transient"),
                ("undelivered", None): ("Bounce", "Undetermined"),
                ("failed", "CONTENT_REJECTED"): ("Reject", "Reject"),
                ("failed", None): ("Bounce", "Permanent"),
            },
        ),
        Profile(
            "sendgrid",
            _plays("sendgrid"),
            lookup_by_id=frozenset(),
            reference_field="tidings_attempt",  # custom_args come back as top-level fields
            vocabulary={
                ("queued", None): ("processed", None),
                ("delivered", None): ("delivered", None),
                ("delivered", "COMPLAINT"): ("spamreport", "spamreport"),
                ("undelivered", "BOUNCED"): ("bounce", "blocked"),
                ("undelivered", None): ("bounce", "blocked"),
                ("failed", "CONTENT_REJECTED"): ("dropped", "Invalid SMTPAPI header"),
                # An ISP's block of our sender is SendGrid's `blocked` bounce
                # (a soft one), never `bounce`, which says the address is bad.
                ("failed", "SENDER_REJECTED"): ("bounce", "blocked"),
                ("failed", None): ("bounce", "bounce"),
            },
        ),
        Profile(
            "postmark",
            _plays("postmark"),
            lookup_by_id=EMAIL,
            reference_search=True,
            reference_field="Metadata",
            vocabulary={
                ("queued", None): ("Queued", None),
                ("sent", None): ("Sent", None),
                ("delivered", None): ("Delivery", None),
                ("delivered", "COMPLAINT"): ("SpamComplaint", "SpamComplaint"),
                ("undelivered", "BOUNCED"): ("Bounce", "SoftBounce"),
                ("undelivered", None): ("Bounce", "Transient"),
                # Postmark's bounce types: content refused after acceptance is
                # a SpamNotification (BadEmailAddress would say the address
                # does not exist); an ISP's block of the sender is Blocked.
                ("failed", "CONTENT_REJECTED"): ("Bounce", "SpamNotification"),
                ("failed", "SENDER_REJECTED"): ("Bounce", "Blocked"),
                ("failed", None): ("Bounce", "HardBounce"),
            },
            search_visible_after_ms=1_000.0,
        ),
        Profile(
            "infrai",
            _plays("infrai"),
            lookup_by_id=EMAIL,  # GET /v1/email/get/{id}; no SMS lookup is documented
            honours_idempotency=True,
            receipts=False,  # its event list is pull-only and not in its public docs
            echo=Echo.NONE,
            vocabulary={
                ("queued", None): ("queued", None),
                ("sent", None): ("sent", None),
                ("delivered", None): ("delivered", None),
                ("undelivered", None): ("soft_bounced", None),
                # A hard bounce in the adapter's words (`bounced`), so it
                # suppresses the address as a permanent bounce should.
                ("failed", "BOUNCED"): ("bounced", None),
                ("failed", None): ("failed", None),
            },
        ),
    )
}
# What `--profile` accepts, for the help of the commands that take it.
PROFILE_CHOICES = ", ".join(PROFILES) + ", or sms=NAME,email=NAME"
# A provider of one channel is played beside the partner the source
# documents pair it with (R002: "Twilio SendGrid + Twilio Messaging",
# "Postmark + Twilio Messaging", "AWS SES + Amazon SNS"), so a workload of
# both channels meets real capabilities on both.
PARTNERS = {
    "twilio": "sendgrid",
    "sendgrid": "twilio",
    "postmark": "twilio",
    "ses": "sns",
    "sns": "ses",
    "aws_sms": "ses",
    "vonage": "postmark",
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(PROFILES)
        raise ValueError(f"no simulator profile {name!r}; known: {known}") from None


def by_channel(spec: str) -> dict[str, Profile]:
    """The profile each channel plays: `NAME` (with its partner for the other
    channel) or `sms=NAME,email=NAME`."""
    if "=" not in spec:
        chosen = profile(spec.strip())
        partner = PARTNERS.get(chosen.name)
        found = {c: chosen for c in chosen.channels}
        if partner is not None:
            found.update({c: profile(partner) for c in profile(partner).channels - chosen.channels})
        return found
    found = {}
    for part in spec.split(","):
        channel, _, name = part.partition("=")
        channel, name = channel.strip(), name.strip()
        if channel not in BOTH:
            raise ValueError(f"no channel {channel!r} in profile {spec!r}")
        played = profile(name)
        if channel not in played.channels:
            raise ValueError(f"profile {name!r} does not send {channel}")
        found[channel] = played
    if set(found) != BOTH:
        raise ValueError(f"profile {spec!r} must name both channels")
    return found
