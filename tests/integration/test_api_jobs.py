"""Bulk jobs over HTTP: each job's intents are its own, and operators can
act on a whole job at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tidings import Tidings

from .api_support import auth, client, new_key

TENANT = "default"  # the library fixture's tenant, so `prepare_jobs` sees the jobs


def readers(n: int) -> list[dict[str, Any]]:
    return [{"ref": f"reader-{i}", "email": f"reader{i}@example.com"} for i in range(n)]


def report_job_body(key: str, n: int, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotency_key": key,
        "event_class": "report_ready",
        "purpose": "transactional",
        "template": {"name": "report_ready"},
        "channels": ["email"],
        "variables": {"report_name": "Q3 media"},
        "audience": readers(n),
        "report": {"id": "8421", "revision": 7},
    }
    body.update(overrides)
    return body


@pytest.fixture
def http(tidings: Tidings, tmp_path: Path) -> TestClient:
    tidings.publish_template(
        "report_ready",
        channel="email",
        subject="Report {{ report_name }} is ready",
        body="Your report {{ report_name }} is attached.",
        required_variables=["report_name"],
        attachment_policy="required",
    )
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.4 report")
    tidings.register_report(
        "8421", 7, filename="q3.pdf", content_type="application/pdf", location=str(path)
    )
    api = client(tidings)
    api.headers.update(auth(new_key(tidings, TENANT)))
    return api


def test_two_jobs_for_one_report_revision_each_count_their_audience(
    http: TestClient, tidings: Tidings
) -> None:
    first = http.post("/v1/jobs", json=report_job_body("mailing", 3))
    second = http.post("/v1/jobs", json=report_job_body("re-send", 3))
    assert first.status_code == second.status_code == 202, second.text
    tidings.prepare_jobs()
    for answer in (first, second):
        view = http.get(f"/v1/jobs/{answer.json()['id']}").json()
        assert view["counts"] == {"pending": 3}, view
        page = http.get(f"/v1/jobs/{answer.json()['id']}/recipients").json()
        assert [i["state"] for i in page["items"]] == ["pending"] * 3


def test_a_job_is_canceled_over_http(http: TestClient, tidings: Tidings) -> None:
    job = http.post("/v1/jobs", json=report_job_body("mailing", 4)).json()
    preparing = http.post(f"/v1/jobs/{job['id']}/cancel", json={"reason": "operator"})
    assert preparing.status_code == 409, preparing.text
    tidings.prepare_jobs()
    answer = http.post(f"/v1/jobs/{job['id']}/cancel", json={"reason": "operator"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"canceled": 4, "already_final": 0}
    assert http.get(f"/v1/jobs/{job['id']}").json()["counts"] == {"canceled": 4}
