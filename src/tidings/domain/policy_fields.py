"""Reading a policy document's values: objects, keys and bounded numbers.

The errors name the value's path, so `POST /v1/policies` answers 422 with
the field and the library raises InvalidInput naming it (store/policies.py).
Split from policy_document.py, which says what each rule means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tidings.domain import policy_bounds as bounds


class PolicyError(ValueError):
    """The policy document is invalid; the message names the field.

    `field` is the path of the offending value (`retry.max_seconds`,
    `frequency_caps[0].limit`): every message starts with it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.field = message.split(":", 1)[0]


class PolicyLimitError(PolicyError):
    """A number past its limit (domain/policy_bounds.py): a well-formed
    document that would stop shared arithmetic for every tenant."""


def fields(
    value: Any, where: str, required: frozenset[str], optional: frozenset[str] = frozenset()
) -> Mapping[str, Any]:
    doc = obj(value, where)
    unknown = sorted(set(doc) - required - optional)
    missing = sorted(required - set(doc))
    if unknown:
        raise PolicyError(f"{where}: unknown key(s) {', '.join(unknown)}")
    if missing:
        raise PolicyError(f"{where}: missing key(s) {', '.join(missing)}")
    return doc


def obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise PolicyError(f"{where}: expected an object")
    return value


def integer(value: Any, where: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PolicyError(f"{where}: expected an integer >= {minimum}")
    if value > maximum:
        raise PolicyLimitError(f"{where}: expected an integer from {minimum} to {maximum}")
    return value


def number(value: Any, where: str, maximum: float) -> float:
    """A finite number up to `maximum`; lower bounds are the dataclasses'.
    Checked before `float()`, which raises on a huge integer."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(f"{where}: expected a number")
    if not bounds.within(value, -math.inf, maximum):
        raise PolicyLimitError(f"{where}: expected a finite number at most {maximum}")
    return float(value)
