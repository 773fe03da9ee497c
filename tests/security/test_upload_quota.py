"""Issue #39, finding 9: a tenant's stored, unused audience uploads are
bounded (invariant 11).

The attack: uploads are kept a day for a job to use, and only how many
run at once was bounded (per process). A `send` key could upload audience
after audience, up to 1 GiB each, and never use them: the shared database
filled with one tenant's staged rows. Now a tenant holds at most
`MAX_PENDING_UPLOADS` unused, unexpired uploads (in progress or waiting
for a job); the next answers 409 TOO_MANY_PENDING_UPLOADS and stores
nothing, other tenants are not affected, and an upload that expires or
is used by a job frees its place.
"""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.security.key_support import auth, client, is_problem, new_key
from tidings import Conflict, ManualClock, Tidings
from tidings.jobs import uploads

NDJSON = {"content-type": "application/x-ndjson"}


def upload(http: TestClient, key: str, ref: str = "reader-1") -> httpx.Response:
    line = f'{{"ref": "{ref}", "email": "reader@example.com"}}\n'
    return http.post("/v1/audiences", content=line, headers={**auth(key), **NDJSON})


def test_a_tenants_unused_uploads_are_bounded(
    tidings: Tidings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(uploads, "MAX_PENDING_UPLOADS", 2)
    http = client(tidings)
    acme, globex = new_key(tidings, "acme", ["send"]), new_key(tidings, "globex", ["send"])
    assert [upload(http, acme).status_code for _ in range(2)] == [201, 201]

    full = upload(http, acme)
    body = is_problem(full, 409, "TOO_MANY_PENDING_UPLOADS")
    assert "2" in body["detail"]
    with pytest.raises(Conflict):  # the library is held to it too
        tidings.for_tenant("acme").upload_audience([{"ref": "r", "email": "r@example.com"}])
    assert upload(http, globex).status_code == 201

    clock.advance(seconds=uploads.UPLOAD_TTL.total_seconds() + 1)  # the two expire
    assert upload(http, acme).status_code == 201
