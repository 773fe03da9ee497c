"""Fixtures shared by the provider tests."""

from __future__ import annotations

import pytest

from tests.providers.peer_support import SnsSigner


@pytest.fixture
def signer() -> SnsSigner:
    """Plays SNS for the adapters fed by SNS events (SES, AWS SMS)."""
    return SnsSigner()


# Twilio's published description: the `spec` and `prism_url` fixtures.
from tests.providers.twilio_peer import prism_url, spec  # noqa: E402, F401
