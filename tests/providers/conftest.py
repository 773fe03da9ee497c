"""Fixtures shared by the provider tests."""

from __future__ import annotations

import pytest

from tests.providers.peer_support import SnsSigner


@pytest.fixture
def signer() -> SnsSigner:
    """Plays SNS for the adapters fed by SNS events (SES, AWS SMS)."""
    return SnsSigner()
