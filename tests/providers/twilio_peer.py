"""Twilio's published OpenAPI description as a test peer: the request check,
a fake answering with the description's own example shapes, and Prism
serving the description (tests/providers/peers/README.md).

`spec` and `prism_url` are fixtures (registered in conftest.py); a missing
peer skips its tests, or fails them where CI sets TIDINGS_REQUIRE_PEERS=1.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.lanes import starts_processes
from tests.providers.peer_support import FakeHttpProvider, new_id
from tests.providers.support import free_port
from tidings.providers.twilio import TwilioAdapter

# Twilio's published OpenAPI description (tests/providers/peers/README.md).
PEERS = Path(__file__).resolve().parent / "peers"
SPEC_PATH = Path(os.environ.get("TIDINGS_TWILIO_OPENAPI", PEERS / "twilio_api_v2010.json"))
# Set by CI: a peer that is missing fails the run instead of skipping its tests.
REQUIRE_PEERS = os.environ.get("TIDINGS_REQUIRE_PEERS") == "1"


def missing_peer(why: str) -> None:
    if REQUIRE_PEERS:
        pytest.fail(f"{why}, and TIDINGS_REQUIRE_PEERS=1 forbids skipping")
    pytest.skip(why)


MESSAGES = "/2010-04-01/Accounts/{AccountSid}/Messages.json"
MESSAGE = "/2010-04-01/Accounts/{AccountSid}/Messages/{Sid}.json"
ACCOUNT = "AC" + "a" * 32
TOKEN = "test-auth-token-0123456789"
SERVICE = "MG" + "b" * 32
CALLBACK = "https://hooks.tidings.test/v1/webhooks/twilio"


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    if not SPEC_PATH.is_file():
        missing_peer(f"Twilio OpenAPI description not found at {SPEC_PATH}")
    return json.loads(SPEC_PATH.read_text())


# --- the OpenAPI check (used by the fake on every send) -----------------------


def resolve(spec: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        node: Any = spec
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def spec_errors(spec: Mapping[str, Any], request: httpx.Request) -> list[str]:
    """What Twilio's OpenAPI description says is wrong with a send request."""
    operation = spec["paths"][MESSAGES]["post"]
    errors = _path_errors(spec, operation, request.url.path)
    content = operation["requestBody"]["content"]
    if request.headers.get("content-type", "").split(";")[0] not in content:
        return [*errors, f"content type {request.headers.get('content-type')!r}"]
    schema = resolve(spec, content["application/x-www-form-urlencoded"]["schema"])
    form = {k: v[0] for k, v in parse_qs(request.content.decode(), keep_blank_values=True).items()}
    errors += [f"missing {name}" for name in schema.get("required", []) if name not in form]
    for name, value in form.items():
        prop = schema["properties"].get(name)
        errors += [f"unknown {name}"] if prop is None else _value_errors(spec, name, value, prop)
    # Stated in the parameter descriptions rather than the schema: a sender is required.
    if not {"From", "MessagingServiceSid"} & form.keys():
        errors.append("neither From nor MessagingServiceSid")
    if not request.headers.get("authorization", "").startswith("Basic "):
        errors.append("no Basic credentials (security scheme accountSid_authToken)")
    return errors


def _path_errors(spec: Mapping[str, Any], operation: Mapping[str, Any], path: str) -> list[str]:
    match = re.fullmatch(r"/2010-04-01/Accounts/([^/]+)/Messages\.json", path)
    if not match:
        return [f"path {path!r}"]
    param = next(p for p in operation["parameters"] if p["name"] == "AccountSid")
    return _value_errors(spec, "AccountSid", match.group(1), param["schema"])


def _value_errors(spec: Mapping[str, Any], name: str, value: str, prop: Any) -> list[str]:
    prop = resolve(spec, prop)
    kind, errors = prop.get("type"), []
    if kind == "integer" and not re.fullmatch(r"-?\d+", value):
        errors.append(f"{name} is not an integer")
    if kind == "boolean" and value not in ("true", "false"):
        errors.append(f"{name} is not a boolean")
    if "pattern" in prop and not re.search(prop["pattern"], value):
        errors.append(f"{name} does not match {prop['pattern']}")
    if "enum" in prop and value not in prop["enum"]:
        errors.append(f"{name} is not one of {prop['enum']}")
    if prop.get("format") == "uri" and not (urlsplit(value).scheme and urlsplit(value).netloc):
        errors.append(f"{name} is not a URI")
    if not prop.get("minLength", 0) <= len(value) <= prop.get("maxLength", 10**6):
        errors.append(f"{name} has the wrong length")
    return errors


# --- the fake Twilio ----------------------------------------------------------


class TwilioFake(FakeHttpProvider):
    """Twilio's Messages resource, answering with the spec's own example bodies."""

    def __init__(self, spec: Mapping[str, Any]):
        super().__init__()
        self.spec = spec
        self.messages: dict[str, dict[str, Any]] = {}
        self.clock = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def route(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/Messages.json"):
            return self._create(request)
        if request.method == "GET" and request.url.path.endswith("/Messages.json"):
            return self._list(request)
        match = re.search(r"/Messages/([^/]+)\.json$", request.url.path)
        if request.method == "GET" and match:
            return self._fetch(match.group(1))
        return twilio_error(404, 20404, "The requested resource was not found")

    def _create(self, request: httpx.Request) -> httpx.Response:
        errors = spec_errors(self.spec, request)
        assert not errors, f"request does not match Twilio's OpenAPI: {errors}"
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        callback = form.get("StatusCallback", "")
        self.record(parse_qs(urlsplit(callback).query).get("tidings_attempt", [None])[0])
        outcome = self.outcomes.get(form["To"], "accept")
        if outcome == "rate_limit":
            return twilio_error(429, 20429, "Too Many Requests")
        if outcome == "reject":
            invalid = f"The 'To' number {form['To']} is not a valid phone number."
            return twilio_error(400, 21211, invalid)
        message = self._example("post", MESSAGES, "201", "create") | {
            "sid": new_id("SM")[:34],
            "to": form["To"],
            "status": "accepted" if "MessagingServiceSid" in form else "queued",
            "error_code": None,
            "date_created": email.utils.format_datetime(self.now(), usegmt=True),
        }
        self.messages[message["sid"]] = message | {"outcome": outcome}
        return self.stall(request) if outcome == "timeout" else httpx.Response(201, json=message)

    def _list(self, request: httpx.Request) -> httpx.Response:
        """The Messages list: newest first, paged by PageSize and Page."""
        operation = self.spec["paths"][MESSAGES]["get"]
        known = {p["name"] for p in operation["parameters"]}
        params = dict(request.url.params)
        assert set(params) <= known, f"not in Twilio's ListMessage: {set(params) - known}"
        size, page = int(params.get("PageSize", "50")), int(params.get("Page", "0"))
        listed = [
            {k: v for k, v in m.items() if k != "outcome"}
            for m in reversed(self.messages.values())
            if m["to"] == params.get("To", m["to"])
        ]
        shown = listed[page * size : (page + 1) * size]
        more = len(listed) > (page + 1) * size
        following = {**params, "Page": str(page + 1), "PageToken": "PA" + new_id()[:32]}
        path = request.url.path
        body = self._example("get", MESSAGES, "200", "readFullPage1") | {
            "messages": shown,
            "page": page,
            "page_size": size,
            "next_page_uri": f"{path}?{urlencode(following)}" if more else None,
        }
        return httpx.Response(200, json=body)

    def now(self) -> datetime:
        return self.clock

    def _fetch(self, sid: str) -> httpx.Response:
        message = self.messages.get(sid)
        if message is None:
            missing = f"The requested resource /Messages/{sid}.json was not found"
            return twilio_error(404, 20404, missing)
        body = {k: v for k, v in message.items() if k != "outcome"}
        return httpx.Response(200, json=self._example("get", MESSAGE, "200", "fetch") | body)

    def settle(self) -> None:
        for message in self.messages.values():
            failed = message["outcome"] == "undeliverable"
            message["status"] = "undelivered" if failed else "delivered"
            message["error_code"] = 30003 if failed else None
            message["date_updated"] = "Thu, 24 Aug 2023 05:09:00 +0000"

    def _example(self, method: str, path: str, status: str, name: str) -> dict[str, Any]:
        response = self.spec["paths"][path][method]["responses"][status]
        return dict(response["content"]["application/json"]["examples"][name]["value"])


def twilio_error(status: int, code: int, message: str) -> httpx.Response:
    # Twilio's REST error body.
    more_info = f"https://www.twilio.com/docs/errors/{code}"
    body = {"code": code, "message": message, "more_info": more_info, "status": status}
    return httpx.Response(status, json=body)


def twilio_signature(token: str, url: str, params: Mapping[str, str]) -> str:
    # Twilio's published algorithm, written out independently of the adapter.
    data = url + "".join(f"{name}{params[name]}" for name in sorted(params))
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()


def make_adapter(fake: TwilioFake, **kwargs: Any) -> TwilioAdapter:
    options: dict[str, Any] = {"from_number": "+15550009999", "status_callback": CALLBACK}
    options |= kwargs
    client = fake.client("https://api.twilio.com")
    return TwilioAdapter(ACCOUNT, TOKEN, client=client, **options)


# --- Prism: Twilio's own description validating our requests ------------------------


def prism_binary() -> str | None:
    candidates = [
        os.environ.get("TIDINGS_PRISM"),
        shutil.which("prism"),
        str(Path(__file__).resolve().parents[2] / ".tools" / "node_modules" / ".bin" / "prism"),
    ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


@pytest.fixture(scope="module")
@starts_processes
def prism_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_prism(SPEC_PATH, tmp_path_factory.mktemp("prism"))


def serve_prism(spec: Path, tmp: Path) -> Iterator[str]:
    """Prism serving the description `spec`, logging into `tmp`; its URL."""
    binary = prism_binary()
    if binary is None or not spec.is_file():
        missing_peer("Stoplight Prism is not installed (scripts/install-prism, or TIDINGS_PRISM)")
    port = free_port()
    with (tmp / "prism.log").open("wb") as log:
        command = [binary, "mock", "-h", "127.0.0.1", "-p", str(port), str(spec)]
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_for_prism(proc, url)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def _wait_for_prism(proc: subprocess.Popen[bytes], url: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail("prism exited early")
        try:
            httpx.get(url + "/", timeout=0.5)
            return
        except httpx.TransportError:
            time.sleep(0.2)  # waiting on a real process, bounded by the deadline
    pytest.fail(f"prism not up within {deadline_s}s")
