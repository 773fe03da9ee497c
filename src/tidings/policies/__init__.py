"""Built-in example policies, shipped as package data.

This is the one place a policy file is read; `tidings.domain.policy_document`
only parses the resulting mapping, so the domain stays free of I/O.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from tidings.domain.policy_document import Policy, PolicyError, parse_policy

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def builtin_names() -> list[str]:
    files = resources.files(__name__).iterdir()
    return sorted(f.name.removesuffix(".json") for f in files if f.name.endswith(".json"))


def load_builtin(name: str) -> Policy:
    return parse_policy(builtin_document(name))


def builtin_document(name: str) -> dict[str, Any]:
    """The raw document, as stored when a built-in policy is published."""
    # The name check keeps a caller-supplied name from reaching outside the
    # package (no separators, no dots).
    if not _NAME.match(name) or name not in builtin_names():
        raise PolicyError(f"no built-in policy named {name!r}")
    return document(resources.files(__name__).joinpath(f"{name}.json").read_text("utf-8"))


def load_file(path: Path) -> Policy:
    return loads(path.read_text("utf-8"))


def loads(text: str) -> Policy:
    return parse_policy(document(text))


def document(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"policy is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise PolicyError("a policy document is a JSON object")
    return doc


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of repeated keys; in a policy that silently drops
    # a rule, so a repeat is an error.
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise PolicyError(f"duplicate key(s) {', '.join(repeated)}")
    return dict(pairs)
