"""Invariant 11: a tenant's name server holds up nobody else (issue #39,
finding 4).

The attack: a tenant registers event webhooks on a name whose name server
never answers. Registration resolved the name on the API's shared thread
pool, each request holding a thread for the whole resolution deadline, on
a resolver pool of four threads shared by every tenant: at about 7
requests/s another tenant's `GET /v1/events` took 15-20 s instead of 0.08 s.
Now a lookup is awaited without holding an API thread, a tenant has at most
`resolver.PER_TENANT` lookups under way (more are refused at once: 429
DNS_BUSY), and one past its deadline answers 504 DNS_TIMEOUT.

The name server is played by a `socket.getaddrinfo` that never answers for
the hostile name (the same seam as test_ssrf.py's rebinding tests): glibc
offers no per-process name server to point at a silent loopback socket.
The API is the in-process app with real concurrency (requests from many
threads through one TestClient, sync routes on its thread pool).
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tidings import Tidings
from tidings.platform import outbound, resolver
from tidings.platform.outbound import AddressPolicy, OutboundClient, OutboundError
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.receipts import render

from ..integration.api_support import auth, client, new_key
from .webhook_receivers import receiver

HOSTILE, VICTIM = "hostile", "victim"
SILENT = "silent-ns.example"  # its name server never answers
PUBLIC = "victim.example"  # answers at once, with a public address
LOCAL = "receiver.example"  # answers at once: the loopback receiver
SECRET = "a-webhook-secret-of-some-length"
RECEIPT_SECRET = "dns-isolation-receipt-secret"
# More requests than the API has threads (40), at a steady rate far under
# the rate limit; each used to hold a thread for the whole deadline.
HOSTILE_REQUESTS, PER_SECOND = 48, 24


class SilentNameServer:
    """What `socket.getaddrinfo` answers here: never, for SILENT (until the
    test ends); a public address at once, for PUBLIC."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.release = threading.Event()
        self.asked: Counter[str] = Counter()

    def __call__(self, host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        self.asked[host] += 1
        if host == SILENT:
            self.release.wait(60)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        if host in (PUBLIC, LOCAL):
            address = "93.184.215.14" if host == PUBLIC else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return self.real(host, port, *args, **kwargs)


@pytest.fixture
def name_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentNameServer]:
    server = SilentNameServer(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", server)
    yield server
    server.release.set()  # the lookups still under way end now


def _register(http: Any, key: str, host: str) -> httpx.Response:
    body = {"url": f"https://{host}/hooks", "secret": SECRET}
    answer: httpx.Response = http.put("/v1/events/webhook", json=body, headers=auth(key))
    return answer


def _receipt(http: Any) -> httpx.Response:
    event = {"event_id": "e1", "message_id": "SIM-none", "status": "delivered"}
    headers, body = render(event, RECEIPT_SECRET, int(time.time()))
    answer: httpx.Response = http.post("/v1/webhooks/simulator", content=body, headers=headers)
    return answer


def test_a_silent_name_server_holds_up_no_other_tenant(
    tidings: Tidings, name_server: SilentNameServer
) -> None:
    hostile, victim = new_key(tidings, HOSTILE), new_key(tidings, VICTIM)
    adapters = {"simulator": SimulatorAdapter("http://x", RECEIPT_SECRET)}
    with client(tidings, adapters) as http, ThreadPoolExecutor(HOSTILE_REQUESTS) as pool:
        started = time.monotonic()
        attack: list[Future[httpx.Response]] = []
        for _ in range(HOSTILE_REQUESTS):
            attack.append(pool.submit(_register, http, hostile, SILENT))
            time.sleep(1 / PER_SECOND)

        feed = http.get("/v1/events", headers=auth(victim))
        registered = _register(http, victim, PUBLIC)
        receipt = _receipt(http)
        done = time.monotonic()
        # All answered while the first hostile lookup still hangs, before
        # its deadline would have freed anything.
        assert done - started < outbound.REGISTRATION_RESOLVE_SECONDS - 0.5, done - started
        assert not all(f.done() for f in attack)
        answers = [f.result() for f in attack]
        ended = time.monotonic()

    assert feed.status_code == 200, feed.text
    assert registered.status_code == 200, registered.text
    assert receipt.status_code < 500, receipt.text
    # The hostile tenant waited at most the deadline, and held at most its
    # share of the resolver.
    sending = HOSTILE_REQUESTS / PER_SECOND
    assert ended - started < sending + outbound.REGISTRATION_RESOLVE_SECONDS + 2
    codes = Counter((a.status_code, a.json()["code"]) for a in answers)
    assert set(codes) <= {(504, "DNS_TIMEOUT"), (429, "DNS_BUSY")}, codes
    assert name_server.asked[SILENT] <= resolver.PER_TENANT
    assert answers[0].headers["content-type"] == "application/problem+json"


def _push(http: OutboundClient, url: str, tenant: str) -> str:
    try:
        answer = http.post(url, b"{}", {"content-type": "application/json"}, tenant)
    except OutboundError as exc:
        return exc.code
    return str(answer.status_code)


def test_a_silent_name_server_holds_up_no_other_tenants_push(
    name_server: SilentNameServer,
) -> None:
    # The workers' pushes share one client and the resolver: the hostile
    # tenant's pushes (more at once than the resolver has threads) end at
    # their deadline, and the victim's push resolves and arrives meanwhile.
    http = OutboundClient(AddressPolicy(allow_private=True), deadline_seconds=2.0)
    with receiver() as (received, port), ThreadPoolExecutor(resolver.THREADS + 2) as pool:
        started = time.monotonic()
        hostile = [
            pool.submit(_push, http, f"http://{SILENT}/hooks", HOSTILE)
            for _ in range(resolver.THREADS + 2)
        ]
        # Wait until the hostile tenant holds every lookup its cap allows.
        asked = time.monotonic() + http.deadline_seconds
        while name_server.asked[SILENT] < resolver.PER_TENANT and time.monotonic() < asked:
            time.sleep(0.01)
        assert name_server.asked[SILENT] == resolver.PER_TENANT
        assert _push(http, f"http://{LOCAL}:{port}/hooks", VICTIM) == "204"
        assert time.monotonic() - started < http.deadline_seconds
        codes = Counter(f.result() for f in hostile)
    assert received.hosts == [f"{LOCAL}:{port}"]
    assert set(codes) <= {outbound.DEADLINE_EXCEEDED, resolver.DNS_BUSY}, codes
    assert name_server.asked[SILENT] <= resolver.PER_TENANT
    http.close()
