"""The simulator's runtime configuration (`GET`/`PUT /_config`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tidings.providers.simulator.profiles import Profile, by_channel

# A well-known development secret: the simulator is a test peer, never a real
# provider, and `tidings up` must work with zero setup.
DEFAULT_WEBHOOK_SECRET = "tidings-simulator-secret"

Rate = Annotated[float, Field(ge=0.0, le=1.0)]


class SimulatorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_ms: float = Field(default=0.0, ge=0)
    rate_429: Rate = 0.0
    rate_5xx: Rate = 0.0
    # Accept and record the message, then stall the answer for timeout_stall_ms:
    # longer than any sane client timeout, so the client sees an ambiguous outcome.
    rate_timeout: Rate = 0.0
    timeout_stall_ms: float = Field(default=30_000.0, ge=0)
    # Accept and record the message, then answer 500 as if it had not been
    # (#37: "a 5xx after acceptance"): a resend on that answer is a duplicate.
    rate_5xx_after_accept: Rate = 0.0
    retry_after_seconds: int = Field(default=1, ge=0)
    # Lookups and searches that answer 500: a provider outage hits them too.
    rate_lookup_5xx: Rate = 0.0
    receipt_delay_ms: float = Field(default=200.0, ge=0)
    duplicate_rate: Rate = 0.0
    reorder: bool = False
    loss_rate: Rate = 0.0
    delivered_share: Rate = 1.0
    seed: int = 0
    webhook_url: str | None = None
    webhook_secret: str = DEFAULT_WEBHOOK_SECRET
    # Which real provider to play (profiles.py): `NAME`, or `sms=NAME,email=NAME`.
    profile: str = "ideal"
    # Speak each profile's provider's own wire where the simulator has it
    # (wire_twilio.py, wire_postmark.py, wire_sendgrid.py, wire_vonage.py,
    # wire_aws.py, wire_infrai.py; Infrai posts no receipts at all):
    # its receipts are then that provider's, authenticated its way with
    # `webhook_secret` as the provider's key (Twilio's Auth Token,
    # Postmark's webhook password, the seed of SendGrid's signing key,
    # Vonage's signature secret, AWS's secret access key).
    wire: bool = False
    # The simulator's base URL as receivers reach it: SNS envelopes name
    # its signing certificate there (wire_aws_events.py). `serve` sets it.
    public_url: str = "http://127.0.0.1:8099"
    # How long after acceptance a message shows in a list or reference
    # search; None: the profile's own (real searches are eventually consistent).
    search_visible_after_ms: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _fault_rates_fit(self) -> SimulatorConfig:
        # One uniform draw is split between the four faults, so they must fit in 1.
        faults = self.rate_429 + self.rate_5xx + self.rate_timeout + self.rate_5xx_after_accept
        if faults > 1.0:
            raise ValueError(
                "rate_429 + rate_5xx + rate_timeout + rate_5xx_after_accept must not exceed 1"
            )
        by_channel(self.profile)  # raises ValueError naming the known profiles
        return self

    def profiles(self) -> dict[str, Profile]:
        """The profile each channel plays."""
        return by_channel(self.profile)

    def visible_after_s(self, played: Profile) -> float:
        chosen = self.search_visible_after_ms
        return (played.search_visible_after_ms if chosen is None else chosen) / 1000

    def updated(self, changes: Mapping[str, Any]) -> SimulatorConfig:
        return SimulatorConfig.model_validate({**self.model_dump(), **changes})
