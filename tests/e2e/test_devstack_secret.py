"""The development stack hands its webhook secret to the simulator process
whatever the secret looks like: a random one starts with "-" one time in 64."""

from __future__ import annotations

from pydantic import SecretStr

from tidings.cli.devstack import DevStack
from tidings.platform.settings import Settings


def test_a_secret_that_starts_with_a_dash_reaches_the_simulator() -> None:
    stack = DevStack(settings=Settings(simulator_webhook_secret=SecretStr("-looks-like-an-option")))
    try:
        stack._start_simulator()  # waits for /healthz; a usage error exits 2 first
        assert stack._simulator is not None and stack._simulator.poll() is None
    finally:
        if stack._simulator is not None:
            stack._simulator.terminate()
            stack._simulator.wait(timeout=10)
