"""Inbound SMS keywords: STOP and its synonyms opt out, START opts back in.

Carriers and providers recognise these words alone in a message, ignoring
case and surrounding space (CTIA guidance; Twilio's defaults), so a longer
sentence that merely contains "stop" is not an opt-out.
"""

from __future__ import annotations

from enum import StrEnum

STOP_WORDS = frozenset(
    {"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT", "REVOKE"}
)
START_WORDS = frozenset({"START", "UNSTOP", "YES", "OPTIN"})


class Keyword(StrEnum):
    STOP = "stop"
    START = "start"
    NONE = "none"


def classify(text: str) -> Keyword:
    word = text.strip().strip(".!").upper().replace(" ", "").replace("-", "")
    if word in STOP_WORDS:
        return Keyword.STOP
    if word in START_WORDS:
        return Keyword.START
    return Keyword.NONE
