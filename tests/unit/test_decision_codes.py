"""The decision codes are one enum: the policy returns only its members, the
replay accepts exactly them, and docs/policy.md documents each one with
whether it reschedules."""

from __future__ import annotations

import re
from pathlib import Path

from tidings.domain import policy
from tidings.domain.decision_codes import RETRYABLE_CODES, DecisionCode
from tidings.replay import CODES

POLICY_DOC = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()


def _documented() -> dict[str, str]:
    """The "Codes" table of docs/policy.md: code -> its retryable column."""
    section = POLICY_DOC.split("\n## Codes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| .* \| (.*) \|$", section, re.MULTILINE)
    return dict(rows)


def test_every_code_is_documented_once_and_no_other() -> None:
    assert set(_documented()) == {code.value for code in DecisionCode}


def test_the_docs_say_which_codes_reschedule() -> None:
    for code, retryable in _documented().items():
        assert retryable.startswith("retryable") == (code in RETRYABLE_CODES), code


def test_the_replay_accepts_exactly_the_codes() -> None:
    assert {code.value for code in DecisionCode} == CODES
    assert all(type(code) is str for code in CODES)


def test_a_codes_value_is_its_name() -> None:
    # Stored with every decision and returned by the API: never renamed.
    assert all(code.name == code.value for code in DecisionCode)


def test_the_policy_names_no_code_outside_the_enum() -> None:
    source = Path(policy.__file__).read_text()
    literals = set(re.findall(r"\"([A-Z][A-Z_]{3,})\"", source))
    assert literals <= {code.value for code in DecisionCode}
