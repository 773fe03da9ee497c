"""Fixtures shared by the integration tests."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tidings import Tidings

from .api_support import TENANT, auth, client, new_key, publish_offer


@pytest.fixture
def api(tidings: Tidings) -> TestClient:
    """An API client for `TENANT`, holding a key of every scope, with the offer
    template published."""
    publish_offer(tidings, TENANT)
    http = client(tidings)
    http.headers.update(auth(new_key(tidings, TENANT)))
    return http
