"""Invariant 11: a tenant's event webhook cannot reach internal addresses.

The attack: an `admin` key of one tenant points `PUT /v1/events/webhook`
at the metadata service, loopback or the private network, and tidings'
workers POST there. Refused when the URL is registered (422
URL_NOT_ALLOWED) and again when connecting, so a name that resolves to a
public address at registration and to a private one later (DNS
rebinding) reaches nothing.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from ipaddress import ip_address
from typing import Any

import psycopg
import pytest

from tidings import ManualClock, Tidings
from tidings.platform.outbound import AddressPolicy

from ..integration.api_support import auth, client, is_problem, new_key
from ..integration.dispatch_helpers import simulator, worker
from .webhook_receivers import (
    ALLOW_PRIVATE,
    SECRET,
    canceled_offers,
    push_until,
    ready_tenant,
    receiver,
)

INTERNAL = [
    "http://127.0.0.1:8080/hooks",
    "http://localhost/hooks",
    "http://[::1]/hooks",
    "http://2130706433/hooks",  # 127.0.0.1 written as one number
    "http://0.0.0.0:5432/",
    "http://10.0.0.5/hooks",
    "http://172.16.3.4/hooks",
    "http://192.168.1.1/hooks",
    "http://100.64.0.1/hooks",  # carrier-grade NAT
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[::ffff:127.0.0.1]/hooks",  # IPv4-mapped IPv6
    "http://[::ffff:a9fe:a9fe]/latest/",  # 169.254.169.254, mapped
    "http://[fe80::1]/hooks",
    "http://224.0.0.1/hooks",
    "http://240.0.0.1/hooks",
    "http://no-such-host.invalid/hooks",
]
# With the development setting, loopback and private addresses are allowed;
# these never are.
ALWAYS_REFUSED = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[::ffff:a9fe:a9fe]/latest/",
    "http://[fe80::1]/hooks",
    "http://0.0.0.0:5432/",
    "http://224.0.0.1/hooks",
]


@pytest.fixture(autouse=True)
def production(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE, raising=False)


def _webhooks(db_url: str) -> list[dict[str, Any]]:
    with psycopg.connect(db_url) as conn:
        cur = conn.execute("SELECT tenant_id, url, last_error FROM event_webhooks")
        names = [c.name for c in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


@pytest.mark.parametrize("url", INTERNAL)
def test_internal_webhook_targets_are_refused_at_registration(
    tidings: Tidings, db_url: str, url: str
) -> None:
    api = client(tidings)
    key = new_key(tidings, "acme", ["admin"])
    answer = api.put("/v1/events/webhook", json={"url": url, "secret": SECRET}, headers=auth(key))
    is_problem(answer, 422, "URL_NOT_ALLOWED")
    assert _webhooks(db_url) == []


@pytest.mark.parametrize("url", ALWAYS_REFUSED)
def test_the_development_setting_allows_loopback_never_metadata(
    tidings: Tidings, db_url: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ALLOW_PRIVATE, "1")
    api = client(tidings)
    key = new_key(tidings, "acme", ["admin"])
    loopback = {"url": "http://127.0.0.1:8080/hooks", "secret": SECRET}
    assert api.put("/v1/events/webhook", json=loopback, headers=auth(key)).status_code == 200
    answer = api.put("/v1/events/webhook", json={"url": url, "secret": SECRET}, headers=auth(key))
    is_problem(answer, 422, "URL_NOT_ALLOWED")
    assert [w["url"] for w in _webhooks(db_url)] == [loopback["url"]]


def _rebinding(monkeypatch: pytest.MonkeyPatch, name: str, answers: list[str]) -> list[str]:
    """`name` resolves to each of `answers` in turn (the last one from then
    on), as a hostile DNS server with a zero TTL would answer. Returns the
    log of resolutions of that name."""
    real: Callable[..., Any] = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != name:
            return real(host, port, *args, **kwargs)
        answer = answers[min(len(asked), len(answers) - 1)]
        asked.append(answer)
        return real(answer, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


@pytest.fixture
def acme(tidings: Tidings) -> Iterator[Tidings]:
    yield ready_tenant(tidings.for_tenant("acme"))


def test_a_name_rebound_to_loopback_after_registration_reaches_nothing(
    tidings: Tidings,
    clock: ManualClock,
    acme: Tidings,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with receiver() as (received, port):
        name = "hooks.rebind.test"
        asked = _rebinding(monkeypatch, name, ["93.184.215.14", "127.0.0.1"])
        key = new_key(tidings, "acme", ["admin"])
        hook = {"url": f"http://{name}:{port}/hooks", "secret": SECRET}
        answer = client(tidings).put("/v1/events/webhook", json=hook, headers=auth(key))
        assert answer.status_code == 200, answer.text  # public when it was checked
        canceled_offers(acme, 2)
        w = worker(tidings, simulator(clock))
        assert push_until(w, clock, lambda: len(asked) > 1) == 0
        assert received.bodies == []
        [row] = _webhooks(db_url)
        assert row["last_error"] == "URL_NOT_ALLOWED"
        assert asked == ["93.184.215.14", "127.0.0.1"]  # one resolution per connection


def test_a_name_with_one_private_address_among_public_ones_is_refused(
    tidings: Tidings, acme: Tidings, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "hooks.mixed.test"
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != name:
            return real(host, port, *args, **kwargs)
        return real("93.184.215.14", port, *args, **kwargs) + real(
            "169.254.169.254", port, *args, **kwargs
        )

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    key = new_key(tidings, "acme", ["admin"])
    hook = {"url": f"http://{name}/hooks", "secret": SECRET}
    answer = client(tidings).put("/v1/events/webhook", json=hook, headers=auth(key))
    is_problem(answer, 422, "URL_NOT_ALLOWED")


def test_the_push_connects_to_the_address_it_checked_keeping_the_name(
    tidings: Tidings, clock: ManualClock, acme: Tidings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resolved once, connected to that address: a second lookup (here
    127.0.0.2, where nothing listens) is never made; Host keeps the name."""
    monkeypatch.setenv(ALLOW_PRIVATE, "1")
    with receiver() as (received, port):
        name = "hooks.pinned.test"
        asked = _rebinding(monkeypatch, name, ["127.0.0.1", "127.0.0.1", "127.0.0.2"])
        key = new_key(tidings, "acme", ["admin"])
        hook = {"url": f"http://{name}:{port}/hooks", "secret": SECRET}
        assert client(tidings).put("/v1/events/webhook", json=hook, headers=auth(key)).is_success
        canceled_offers(acme, 2)
        w = worker(tidings, simulator(clock))
        assert push_until(w, clock, lambda: bool(received.bodies)) == 2
        assert received.hosts == [f"{name}:{port}"]
        assert asked == ["127.0.0.1", "127.0.0.1"]


@pytest.mark.parametrize(
    ("address", "allowed_in_development"),
    [
        ("2002:7f00:1::", True),  # 6to4 around 127.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 around 169.254.169.254
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", True),  # Teredo around 127.0.0.1
        ("::ffff:10.1.2.3", True),
        ("169.254.170.2", False),  # ECS task metadata
        ("100.100.100.200", False),  # Alibaba metadata
        ("192.0.2.10", False),  # documentation
    ],
)
def test_addresses_wrapped_in_ipv6_are_judged_by_what_they_carry(
    address: str, allowed_in_development: bool
) -> None:
    assert AddressPolicy().refusal(ip_address(address)) is not None
    allowed = AddressPolicy(allow_private=True).refusal(ip_address(address)) is None
    assert allowed is allowed_in_development
    assert AddressPolicy().refusal(ip_address("93.184.215.14")) is None
