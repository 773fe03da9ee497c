"""The templates and policy the demo publishes."""

from __future__ import annotations

import copy
from typing import Any

from tidings.client import Tidings
from tidings.policies import builtin_document

TEMPLATES: list[dict[str, Any]] = [
    {
        "name": "waitlist_offer",
        "channel": "sms",
        "body": (
            "A spot opened in {{ class_name }} ({{ starts }})."
            " Reply YES by {{ deadline }} to take it."
        ),
        "required_variables": ["class_name", "starts", "deadline"],
    },
    {
        "name": "report_ready",
        "channel": "email",
        "subject": "Your report {{ report_name }} is ready",
        "body": "Hello,\n\nthe report {{ report_name }} is attached.\n\nThe reporting team",
        "required_variables": ["report_name"],
        "attachment_policy": "required",
    },
    {
        "name": "report_ready",
        "channel": "sms",
        "body": "High priority: report {{ report_name }} is ready. It is in your inbox.",
        "required_variables": ["report_name"],
    },
    {
        "name": "password_reset",
        "channel": "email",
        "subject": "Reset your password",
        "body": (
            "We reset your password after suspicious sign-ins. Choose a new one: {{ reset_link }}"
        ),
        "required_variables": ["reset_link"],
        "dispatch_variables": ["reset_link"],  # minted at dispatch, never stored
    },
    {
        "name": "password_reset",
        "channel": "sms",
        "body": "Your account was frozen. Reset your password: {{ reset_link }}",
        "required_variables": ["reset_link"],
        "dispatch_variables": ["reset_link"],  # minted at dispatch, never stored
    },
]


def demo_policy() -> dict[str, Any]:
    """The default policy, with polling fast enough to watch."""
    doc = copy.deepcopy(builtin_document("default"))
    doc["version"] = "demo-1"
    doc["name"] = "demo"
    doc["poll_schedule"] = {
        "first_check_after_seconds": 1,
        "factor": 1.5,
        "max_interval_seconds": 4,
        "jitter": 0.2,
        "max_checks": 12,
        "give_up_after_seconds": 120,
    }
    doc["retry"] = {"base_seconds": 1, "max_seconds": 5, "jitter": 0.5}
    return doc


def publish(t: Tidings) -> None:
    t.publish_policy(demo_policy(), actor="demo")
    for template in TEMPLATES:
        t.publish_template(**template, actor="demo")
