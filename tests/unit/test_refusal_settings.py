"""The `provider_refused` alert's settings, and the provider code a refusal
carries into its sample (issue #37)."""

from __future__ import annotations

from tidings.observability.alerts.config import AlertConfig
from tidings.providers.outcomes import PROVIDER_CODE_CHARS, RejectCode, Rejected


def test_the_window_and_the_page_count_come_from_the_environment() -> None:
    config = AlertConfig.from_env(
        {"TIDINGS_ALERT_REFUSAL_WINDOW_SECONDS": "600", "TIDINGS_ALERT_REFUSAL_PAGE_REQUESTS": "4"}
    )
    assert (config.refusal_window_seconds, config.refusal_page_requests) == (600.0, 4)
    default = AlertConfig.from_env({})
    assert (default.refusal_window_seconds, default.refusal_page_requests) == (3600.0, 10)


def test_the_providers_own_code_is_kept_bounded() -> None:
    refused = Rejected(RejectCode.SENDER_REJECTED, provider_code="x" * 500)
    assert refused.provider_code == "x" * PROVIDER_CODE_CHARS
    assert Rejected(RejectCode.REQUEST_INVALID).provider_code is None
