"""A client generated from the OpenAPI document works (#40, item 8).

openapi-python-client (scripts/install-openapi-client) generates a Python
client from `openapi_document()`; the test imports it and drives the API
with it: a create, a read, an audience upload, a job and its recipients.
What it generates is what a team generating a client gets; a name or a
schema the generator cannot use fails here first. The upload's NDJSON is
sent as raw bytes: the generator knows no NDJSON (its
`content_type_overrides`, set below).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.api_support import auth, new_key, publish_offer
from tidings import Tidings
from tidings.api.app import create_app
from tidings.docs_gen import openapi_document

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = Path(
    os.environ.get(
        "TIDINGS_OPENAPI_CLIENT",
        ROOT / ".tools" / "openapi-python-client" / "bin" / "openapi-python-client",
    )
)
REQUIRE_PEERS = os.environ.get("TIDINGS_REQUIRE_PEERS") == "1"
TENANT = "acme"
CONFIG = "content_type_overrides:\n  application/x-ndjson: application/octet-stream\n"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not GENERATOR.exists():
        why = f"no openapi-python-client at {GENERATOR} (bash scripts/install-openapi-client)"
        if REQUIRE_PEERS:
            pytest.fail(f"{why}, and TIDINGS_REQUIRE_PEERS=1 forbids skipping")
        pytest.skip(why)
    where = tmp_path_factory.mktemp("client")
    (where / "openapi.json").write_text(json.dumps(openapi_document()))
    (where / "config.yaml").write_text(CONFIG)
    done = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(where / "openapi.json"),
            "--config",
            str(where / "config.yaml"),
            "--meta",
            "none",
            "--output-path",
            str(where / "tidings_client"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Every operation generated: a warning means one was left out.
    assert "will not be generated" not in done.stdout + done.stderr, done.stdout
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("tidings_client")
    finally:
        sys.path.remove(str(where))
        for name in [m for m in sys.modules if m.split(".")[0] == "tidings_client"]:
            del sys.modules[name]


def call(generated: Any, operation: str, client: Any, **kwargs: Any) -> Any:
    """`sync_detailed` of an operation, found by its operationId."""
    for tag in ("intents", "jobs", "audiences", "health"):
        try:
            module = importlib.import_module(f"tidings_client.api.{tag}.{operation}")
        except ModuleNotFoundError:
            continue
        return module.sync_detailed(client=client, **kwargs)
    raise AssertionError(f"no generated operation {operation}")


def test_a_generated_client_creates_reads_and_uploads(generated: Any, tidings: Tidings) -> None:
    publish_offer(tidings, TENANT)
    http = TestClient(create_app(tidings), base_url="http://testserver")
    http.headers.update(auth(new_key(tidings, TENANT)))
    client = generated.AuthenticatedClient(base_url="http://testserver", token="unused")
    client.set_httpx_client(http)
    models = importlib.import_module("tidings_client.models")

    health = call(generated, "get_health", client)
    assert health.status_code == 200

    intent_in = models.IntentIn.from_dict(
        {
            "idempotency_key": "generated:1",
            "channel": "sms",
            "recipient": {"ref": "member-1", "phone": "+14155550123"},
            "template": "waitlist_offer",
            "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
            "purpose": "transactional",
            "event_class": "waitlist_offer",
        }
    )
    created = call(generated, "create_intent", client, body=intent_in)
    assert created.status_code == 201, created.content
    intent_id = created.parsed.id
    read = call(generated, "get_intent", client, intent_id=intent_id)
    assert read.status_code == 200 and read.parsed.id == intent_id

    types = importlib.import_module("tidings_client.types")
    lines = b"".join(
        json.dumps({"ref": f"reader-{n}", "phone": "+14155550123"}).encode() + b"\n"
        for n in range(3)
    )
    upload = call(
        generated,
        "upload_audience",
        client,
        body=types.File(payload=lines, mime_type="application/x-ndjson"),
    )
    assert upload.status_code == 201, upload.content
    job_in = models.JobIn.from_dict(
        {
            "idempotency_key": "generated:job",
            "event_class": "waitlist_offer",
            "purpose": "transactional",
            "template": {"name": "waitlist_offer"},
            "channels": ["sms"],
            "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
            "audience_upload": str(upload.parsed.id),
        }
    )
    job = call(generated, "create_job", client, body=job_in)
    assert job.status_code in (201, 202), job.content
    job_id = job.parsed.id
    tidings.prepare_jobs()
    page = call(generated, "list_job_recipients", client, job_id=job_id)
    assert page.status_code == 200, page.content
    assert [r.recipient_ref for r in page.parsed.items] == ["reader-0", "reader-1", "reader-2"]
