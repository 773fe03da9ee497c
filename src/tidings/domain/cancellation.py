"""Why an intent was canceled: a small taxonomy kept for audit."""

from __future__ import annotations

from enum import StrEnum

from tidings.domain.errors import InvalidInput


class CancelReason(StrEnum):
    MEMBER_LEFT = "member_left"
    CLASS_CANCELED = "class_canceled"
    SPOT_CLAIMED = "spot_claimed"
    DEADLINE = "deadline"
    OPERATOR = "operator"


class InvalidCancelReason(InvalidInput):
    def __init__(self, message: str) -> None:
        super().__init__("reason", message)


def parse_reason(value: object) -> CancelReason:
    try:
        return CancelReason(str(value))
    except ValueError:
        known = ", ".join(r.value for r in CancelReason)
        raise InvalidCancelReason(f"unknown cancel reason {value!r}; use one of {known}") from None
