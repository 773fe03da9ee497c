"""The OpenAPI document shows #23's fields and routes, with examples: a
client generated from it must know when an intent will go, how to cancel
many, how to judge a shadow rollout and when a job's evidence expires."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tidings import Tidings

from .api_support import client


@pytest.fixture
def document(tidings: Tidings) -> dict[str, Any]:
    http: TestClient = client(tidings)
    found: dict[str, Any] = http.get("/openapi.json").json()
    return found


def schema(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = document["components"]["schemas"][name]
    return found


def request_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    ref = body["schema"]["$ref"].rsplit("/", 1)[-1]
    return schema(document, ref)


def test_the_new_routes_are_documented_with_example_bodies(document: dict[str, Any]) -> None:
    for path in (
        "/v1/jobs/{job_id}/cancel",
        "/v1/intents/cancel",
        "/v1/controls/shadow-mode/report",
        "/v1/controls/rollout-report",
    ):
        assert path in document["paths"], path
        body = request_schema(document, path)
        assert body.get("examples"), f"{path}: its body has no example"


def test_the_new_fields_are_documented(document: dict[str, Any]) -> None:
    intent = schema(document, "IntentOut")["properties"]
    assert "next_attempt_at" in intent and intent["next_attempt_at"].get("description")
    decision = schema(document, "Decision")["properties"]
    assert decision["retry_after"].get("description")
    job = schema(document, "JobStatus")["properties"]
    for field in ("facts_expire_at", "evidence_expires_at", "created_at"):
        assert field in job, field
    assert "purged" in job["facts_expire_at"]["description"]
    report = schema(document, "ShadowReport")["properties"]
    assert {"agreed", "differences", "matrix"} <= set(report)
