"""What PostgreSQL can store as given, checked before any write.

PostgreSQL `text` and `jsonb` cannot hold a NUL character, a lone
surrogate cannot be encoded as UTF-8, and jsonb refuses NaN and infinities.
Each of those, sent by a client, would travel to the driver and come back
as a 500. Free-form JSON (variables, preferences, policy documents) is also
bounded in nesting depth and encoded size: a value nested 900 deep would be
stored and then could not be serialized back (every read of it would fail),
and a walk over it would hit Python's recursion limit a little deeper.

    check_text("recipient.ref", ref)          # raises InvalidInput
    check_json("preferences", preferences)    # raises InvalidInput
    text_problem(value) / json_problem(value) # the message, or None

The HTTP schemas call the `*_problem` forms (pydantic reports the field);
the library's intake calls the `check_*` forms.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from tidings.domain.errors import InvalidInput

# Deep enough for any honest template variables or preferences document;
# far below Python's recursion limit and pydantic's serialization depth.
MAX_JSON_DEPTH = 32
# One free-form field, encoded. Request bodies are capped at 256 KiB anyway;
# this keeps one field from filling a row (TOAST) and every read of it.
MAX_JSON_BYTES = 65_536


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as PostgreSQL text, or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode"
    return None


def json_problem(value: object, *, max_bytes: int = MAX_JSON_BYTES) -> str | None:
    """Why `value` cannot be stored as jsonb as it is, or None.

    Walks iteratively, so a hostile depth cannot exhaust the stack before
    the depth bound is reached.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
        elif isinstance(item, float):
            problem = None if math.isfinite(item) else "numbers must be finite"
        elif isinstance(item, Mapping | list | tuple):
            if depth > MAX_JSON_DEPTH:
                return f"nested deeper than {MAX_JSON_DEPTH} levels"
            problem = None
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return "object keys must be strings"
                    if (problem := text_problem(key)) is not None:
                        return problem
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        elif item is None or isinstance(item, bool | int):
            problem = None
        else:
            problem = "must be JSON values"
        if problem is not None:
            return problem
    return _size_problem(value, max_bytes)


def _size_problem(value: object, max_bytes: int) -> str | None:
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return "must be JSON values"
    if len(encoded.encode("utf-8")) > max_bytes:
        return f"larger than {max_bytes} bytes encoded"
    return None


def check_text(field: str, value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise InvalidInput(field, problem)
    return value


def check_json(field: str, value: Any, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    problem = json_problem(value, max_bytes=max_bytes)
    if problem is not None:
        raise InvalidInput(field, problem)
    return value


def check_fields(fields: Mapping[str, object]) -> None:
    """Check every string and JSON value of a request, by field name."""
    for name, value in fields.items():
        if isinstance(value, str):
            check_text(name, value)
        elif isinstance(value, Mapping | list | tuple | float):
            check_json(name, value)
