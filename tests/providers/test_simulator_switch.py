"""A channel switched to another provider mid-run (issue #43's soak): each
message stays its own provider's, as Twilio does not forget its messages
because its customer moved to Vonage.

A message is played by the provider it was sent through: a provider's own
wire names it (`played=`), the simulator's protocol takes the channel's
current profile. Its lookups, searches and receipts answer in that
provider's words, whatever the channel plays now.
"""

from __future__ import annotations

from typing import Any

import pytest

from tidings.providers.simulator import SimulatorConfig, SimulatorCore
from tidings.providers.simulator.core import NotSupported

T0 = 1_900_000_000.0
TO = "+15550001234"


def make_core(profile: str) -> SimulatorCore:
    config = SimulatorConfig(profile=profile, webhook_url="http://unused.test", seed=3)
    return SimulatorCore(config, clock=lambda: T0)


def payload(key: str) -> dict[str, Any]:
    return {"to": TO, "body": "hi", "idempotency_key": key}


def test_a_message_sent_before_the_switch_is_still_looked_up_as_its_providers() -> None:
    core = make_core("sms=twilio,email=sendgrid")
    sent = core.send("sms", payload("k1")).body["message_id"]
    core.configure({"profile": "sms=vonage,email=postmark"})
    core.advance(10)
    # Vonage has no lookup by id; Twilio, which took the message, has.
    found = core.lookup(sent)
    assert found is not None and found["message_id"] == sent
    assert [m["message_id"] for m in core.search("sms", TO, 0.0, None, played="twilio")] == [sent]
    with pytest.raises(NotSupported):
        core.search("sms", TO, 0.0, None)  # Vonage, the channel's provider now, has no search


def test_a_send_through_a_providers_wire_is_that_providers_whatever_the_channel_plays() -> None:
    core = make_core("sms=vonage,email=postmark")
    sent = core.send("sms", payload("k2"), played="twilio").body["message_id"]
    assert core.ledger()[-1]["profile"] == "twilio"
    assert {r["profile"] for r in core.receipts()} <= {"twilio"}
    core.advance(10)
    assert core.lookup(sent) is not None
    # Sent through the simulator's own protocol, it is the channel's provider's.
    core.send("sms", payload("k3"))
    assert core.ledger()[-1]["profile"] == "vonage"
