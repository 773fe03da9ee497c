"""The HTTP contract as a client generator reads it (#40, item 8): one
meaningful operationId per operation, every 422 described as the problem
document it is, a `servers` entry, and `/docs` that needs no CDN."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tidings import Tidings

from .api_support import client


@pytest.fixture
def http(tidings: Tidings) -> TestClient:
    return client(tidings)


@pytest.fixture
def document(http: TestClient) -> dict[str, Any]:
    found: dict[str, Any] = http.get("/openapi.json").json()
    return found


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, p, o) for p, ms in document["paths"].items() for m, o in ms.items()]


def test_each_operation_has_a_meaningful_unique_id(document: dict[str, Any]) -> None:
    ids = [o["operationId"] for _, _, o in operations(document)]
    assert len(ids) == len(set(ids)), ids
    for method, path, operation in operations(document):
        found = operation["operationId"]
        # FastAPI's default glues the path and the method on: create_intent_v1_intents_post.
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", found), (method, path, found)
        assert not found.endswith(f"_{method}"), (method, path, found)
    named = {(m, p): o["operationId"] for m, p, o in operations(document)}
    assert named[("post", "/v1/intents")] == "create_intent"
    assert named[("post", "/v1/jobs")] == "create_job"
    assert named[("get", "/v1/jobs/{job_id}/recipients")] == "list_job_recipients"


def test_every_422_is_the_problem_document(document: dict[str, Any]) -> None:
    for method, path, operation in operations(document):
        answer = operation["responses"].get("422")
        if answer is None:
            continue
        content = answer["content"]
        assert list(content) == ["application/problem+json"], (method, path)
        schema = content["application/problem+json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Problem"}, (method, path, schema)
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_the_document_names_its_server(document: dict[str, Any]) -> None:
    assert document["servers"] and document["servers"][0]["url"]


def test_docs_work_offline(http: TestClient) -> None:
    page = http.get("/docs")
    assert page.status_code == 200
    assert "cdn." not in page.text and "https://" not in page.text.split("<body>")[0]
    for asset in re.findall(r"(/docs/assets/[\w.-]+)", page.text):
        answer = http.get(asset)
        assert answer.status_code == 200 and len(answer.content) > 500, asset
    assert "/docs/assets/swagger-ui-bundle.js" in page.text
