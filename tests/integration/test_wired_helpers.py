"""The in-process wiring the crash machine plays wired profiles with
(wired_helpers.py): each real adapter sends through its provider's wire,
and every receipt the simulator posts passes that adapter's own check and
names our attempt (Infrai posts none: its lookup tells)."""

from __future__ import annotations

import time
import uuid

import pytest

from tidings.domain.keys import attempt_key
from tidings.providers.messages import OutboundMessage
from tidings.providers.outcomes import Accepted, ObservedStatus
from tidings.providers.simulator import SimulatorConfig, SimulatorCore

from .wired_helpers import IN_PROCESS, posted_receipts, real_adapter

HOOK = "http://in-process/hook"
KEY = attempt_key(uuid.UUID(int=0x37), 1)


@pytest.mark.parametrize("profile", sorted(IN_PROCESS))
def test_a_wired_profiles_real_adapter_sends_and_reads_its_receipts(profile: str) -> None:
    now = [1_900_000_000.0]
    config = SimulatorConfig(profile=profile, webhook_url=HOOK, wire=True, receipt_delay_ms=100)
    core = SimulatorCore(config, clock=lambda: now[0])
    adapter = real_adapter(profile, core, HOOK)
    assert adapter.name == profile
    channel = IN_PROCESS[profile]
    to = "+14155550123" if channel == "sms" else "ada@example.test"
    sent = adapter.send(OutboundMessage(channel, to, "hello", subject="Hi"), KEY)  # type: ignore[arg-type]
    assert isinstance(sent, Accepted), sent
    now[0] += 5
    seen = [obs for r in posted_receipts(core, time.time) for obs in adapter.verify_webhook(r)]
    if profile == "infrai":
        assert seen == []
        found = adapter.status(sent.provider_message_id)
        assert found is not None and found.status is ObservedStatus.delivered
        return
    assert seen and {obs.attempt_key for obs in seen} == {KEY}
    assert ObservedStatus.delivered in {obs.status for obs in seen}
