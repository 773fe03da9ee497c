"""What the many-hosts run sends through the API hosts: tenants set up, a
stream of single intents spread over the API hosts, a bulk job's audience
uploaded through one host and frozen through the other."""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import httpx

from tidings import Tidings
from tidings.store.api_keys import create_key
from tidings.store.migrate import migrate

from .cluster import SECRET

TENANTS = ("default", "limited", "held")


def phone_for(ref: str) -> str:
    """A number of its own per recipient: a provider's list search by
    number (Twilio's) must not return the whole run. It ends in 7, which
    no magic number of the simulator does (providers/simulator/magic.py)."""
    h = zlib.crc32(ref.encode())
    # A valid San Francisco number (+1 415 NXX XXXX): exchanges start at 2.
    return f"+1415{2 + h % 8}{h // 8 % 100:02d}{h // 800 % 1000:03d}7"


def prepare(db_url: str, rate_limit: dict[str, Any]) -> dict[str, str]:
    """Migrate, publish each tenant's template and policy (`limited` with
    one tenant-wide rate limit); an API key per tenant."""
    migrate(db_url)
    keys = {}
    with Tidings(db_url, secret_key=SECRET) as t:
        for tenant in TENANTS:
            view = t.for_tenant(tenant)
            policy = json.loads(
                resources.files("tidings.policies").joinpath("default.json").read_text()
            )
            if tenant == "limited":
                policy.update(version="limited-1", rate_limits=[rate_limit])
            view.publish_policy(policy)
            view.publish_template("offer", channel="sms", body="A spot opened.")
            with t.db.transaction() as conn:
                _, keys[tenant] = create_key(
                    conn, tenant, ("send", "read", "admin"), "hosts", vault=t.vault
                )
    return keys


def intent_body(key: str) -> dict[str, Any]:
    return {
        "idempotency_key": key,
        "channel": "sms",
        "recipient": {"ref": key, "phone": phone_for(key)},
        "template": {"name": "offer"},
        "purpose": "transactional",
        "event_class": "waitlist_offer",
    }


class ApiClients:
    """One HTTP client per (API host, tenant)."""

    def __init__(self, urls: dict[str, str], keys: dict[str, str]) -> None:
        self.urls = urls
        self._clients = {
            (host, tenant): httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
            )
            for host, url in urls.items()
            for tenant, key in keys.items()
        }

    def __call__(self, host: str, tenant: str = "default") -> httpx.Client:
        return self._clients[(host, tenant)]

    def create(self, host: str, tenant: str, key: str) -> str:
        answer = self(host, tenant).post("/v1/intents", json=intent_body(key))
        assert answer.status_code in (200, 201), answer.text
        return str(answer.json()["id"])

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


@dataclass
class Stream:
    """Single intents at a steady rate, each API host in turn; every tenth
    is canceled through the other host (a cancel racing the workers)."""

    clients: ApiClients
    per_second: float
    ids: list[str] = field(default_factory=list)
    canceled: list[str] = field(default_factory=list)
    created_by: Counter[str] = field(default_factory=Counter)
    seconds_by: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Stream:
        self._thread = threading.Thread(target=self._run, name="intent-stream", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)

    def _run(self) -> None:
        hosts = sorted(self.clients.urls)
        n = 0
        started = time.monotonic()
        while not self._stop.is_set():
            host = hosts[n % len(hosts)]
            try:
                began = time.monotonic()
                intent = self.clients.create(host, "default", f"stream-{n}")
                self.seconds_by[host] += time.monotonic() - began
                self.created_by[host] += 1
                self.ids.append(intent)
                if n % 10 == 9:
                    other = hosts[(n + 1) % len(hosts)]
                    cancel = self.clients(other).post(
                        f"/v1/intents/{intent}/cancel", json={"reason": "member_left"}
                    )
                    assert cancel.status_code in (200, 409), cancel.text
                    if cancel.status_code == 200:
                        self.canceled.append(intent)
            except (httpx.HTTPError, AssertionError) as exc:
                self.errors.append(f"{host}: {exc!r}")
            n += 1
            # A steady rate, not as fast as possible: the workers' load.
            self._stop.wait(max(0.0, started + n / self.per_second - time.monotonic()))


def upload_job(clients: ApiClients, upload_host: str, job_host: str, recipients: int) -> str:
    """The audience streamed in through one host, the job frozen through
    the other: the staged upload is the database's, not the first host's."""
    lines = (
        json.dumps({"ref": f"r{n}", "phone": phone_for(f"r{n}")}).encode() + b"\n"
        for n in range(recipients)
    )
    staged = clients(upload_host).post(
        "/v1/audiences", content=lines, headers={"Content-Type": "application/x-ndjson"}
    )
    assert staged.status_code in (200, 201), staged.text
    job = clients(job_host).post(
        "/v1/jobs",
        json={
            "idempotency_key": "many-hosts-job",
            "event_class": "notice",
            "purpose": "transactional",
            "template": {"name": "offer"},
            "channels": ["sms"],
            "audience_upload": staged.json()["id"],
        },
    )
    assert job.status_code == 202, job.text
    return str(job.json()["id"])


def console_session_crosses_hosts(clients: ApiClients, key: str) -> bool:
    """Sign in to the console on one API host; the session works on the other."""
    first, second = sorted(clients.urls)
    with httpx.Client(base_url=clients.urls[first], timeout=30) as browser:
        assert browser.get("/console/").status_code == 401
        csrf = browser.cookies["tidings_console_csrf"]
        signed = browser.post(
            "/console/login", data={"key": key, "csrf": csrf}, follow_redirects=False
        )
        assert signed.status_code == 303, signed.text
        session = browser.cookies["tidings_console_session"]
    with httpx.Client(base_url=clients.urls[second], timeout=30) as other:
        other.cookies.set("tidings_console_session", session)
        return other.get("/console/").status_code == 200


def burst(clients: ApiClients, host: str, threads: int, seconds: float, tag: str) -> int:
    """As many single intents as `threads` callers can create through one
    API host in `seconds`: how many were created. `tag` keeps each burst's
    keys its own (a replayed key answers 200 and creates nothing)."""
    created = [0] * threads
    stop_at = time.monotonic() + seconds

    def caller(n: int) -> None:
        with httpx.Client(
            base_url=clients.urls[host],
            headers=clients(host).headers,
            timeout=60,
        ) as http:
            while time.monotonic() < stop_at:
                answer = http.post(
                    "/v1/intents", json=intent_body(f"burst-{tag}-{host}-{n}-{created[n]}")
                )
                if answer.status_code == 201:
                    created[n] += 1

    callers = [threading.Thread(target=caller, args=(n,)) for n in range(threads)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    return sum(created)
