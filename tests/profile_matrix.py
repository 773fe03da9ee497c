"""What the crash matrices expect of each simulator profile, read from the
profile itself: a profile added to `PROFILES` joins every matrix."""

from __future__ import annotations

from tidings.providers.simulator.profiles import PROFILES


def played_channel(profile: str) -> str:
    """The channel a crash matrix plays `profile` on: its own, and for a
    profile of both channels the one it can look up (Infrai's e-mail)."""
    played = PROFILES[profile]
    if len(played.channels) == 1:
        return next(iter(played.channels))
    return "sms" if "sms" in played.lookup_by_id else "email"


def proves_absence(profile: str) -> bool:
    """The provider can prove a message never arrived: by our key, by our
    reference stored with it, or by its list search."""
    played = PROFILES[profile]
    return played.lookup_by_key or played.reference_search or played.list_search


def finds_lost_answers(profile: str) -> bool:
    """A call whose answer was lost can be tied to its attempt: by a search,
    or by receipts echoing our reference (and delivery is reported at all)."""
    played = PROFILES[profile]
    echoes = played.receipts and played.echo.value != "none"
    return proves_absence(profile) or echoes


def reports_delivery(profile: str) -> bool:
    """The provider ever tells of a delivery: by a receipt or a lookup (SNS
    only logs it to CloudWatch)."""
    played = PROFILES[profile]
    return played.receipts or played.lookup_by_key or bool(played.lookup_by_id)


# Every profile and the channel each crash matrix plays it on.
CHANNEL = {name: played_channel(name) for name in PROFILES}
