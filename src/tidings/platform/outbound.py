"""Outbound HTTP to URLs a tenant chose: which addresses may be reached,
and a client that holds to that and to one deadline per request.

A tenant's URL may name anything: the cloud's metadata service, the
database's host, a port on loopback. Every address its host resolves to is
checked twice: when the URL is registered (a clear 422 early) and when
connecting. The connection resolves once, checks every address and
connects to an address it checked, so a name re-pointed after the first
check (DNS rebinding) reaches nothing; the Host header and TLS SNI keep the
name.

A per-read timeout does not bound a server that trickles one byte at a
time: every step here (resolving, connecting, TLS, each write and read)
gets only what remains of one deadline for the whole request.

Loopback and private addresses are allowed only with
`TIDINGS_ALLOW_PRIVATE_WEBHOOKS=1`, for development (`tidings up`) and
tests; metadata, link-local, multicast, unspecified and reserved addresses
never are.

Names are looked up on the resolver's own pool (tidings/platform/resolver.py),
each tenant holding at most a few of its threads, each caller waiting at
most until its deadline: a tenant's silent name server delays only it.

    OutboundError (code: URL_NOT_ALLOWED, DEADLINE_EXCEEDED, DNS_BUSY, ...)
    RefusedUrl (InvalidInput, code URL_NOT_ALLOWED): at registration
    ResolveTimeout (DNS_TIMEOUT), ResolverBusy (DNS_BUSY): at registration
"""

from __future__ import annotations

import contextvars
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from typing import Any

import httpcore
import httpx

from tidings.domain.errors import InvalidInput
from tidings.platform import resolver
from tidings.platform.resolver import DNS_BUSY, Address, ResolverBusy, ResolveTimeout
from tidings.platform.settings import Settings

URL_NOT_ALLOWED = "URL_NOT_ALLOWED"
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"

# Instance metadata services (AWS, GCP and Azure share 169.254.169.254;
# AWS's IPv6 one, ECS task metadata, Alibaba's): refused even in development.
METADATA = frozenset(
    ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200")
)
# What the development setting opens: loopback, RFC 1918, carrier-grade NAT
# and IPv6 unique-local addresses. Anything else that is not global stays shut.
PRIVATE = tuple(
    ip_network(n)
    for n in (
        "127.0.0.0/8",
        "::1/128",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "fc00::/7",
    )
)
# How long registering a URL may wait for its name to resolve.
REGISTRATION_RESOLVE_SECONDS = 5.0
THIS_NETWORK = ip_network("0.0.0.0/8")  # "0.0.0.1" reaches the local host on Linux
NAT64 = ip_network("64:ff9b::/96")
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "outbound_deadline", default=None
)
# Whose request this is: each tenant's lookups are capped (resolver.py).
_tenant: contextvars.ContextVar[str] = contextvars.ContextVar("outbound_tenant", default="")


class RefusedUrl(InvalidInput):
    """A URL whose host is, or resolves to, an address tidings may not call."""

    code = URL_NOT_ALLOWED


class OutboundError(Exception):
    """A request that got no usable answer; `code` says why (stable, safe
    to store: never the URL or anything the server sent)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class AddressRefused(httpcore.ConnectError):
    """Raised inside the transport; surfaces as OutboundError(URL_NOT_ALLOWED)."""


class _LookupsBusy(httpcore.ConnectError):
    """Raised inside the transport; surfaces as OutboundError(DNS_BUSY)."""


@dataclass(frozen=True)
class AddressPolicy:
    allow_private: bool = False

    @classmethod
    def from_env(cls) -> AddressPolicy:
        return cls(allow_private=Settings().allow_private_webhooks)

    def refusal(self, address: Address) -> str | None:
        """Why `address` may not be called, or None when it may."""
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return self.refusal(embedded)
        if address in METADATA:
            return "a cloud metadata address"
        if address.is_unspecified or address in THIS_NETWORK:
            return "an unspecified address"
        if address.is_multicast:
            return "a multicast address"
        if address.is_link_local:
            return "a link-local address"
        if any(address in network for network in PRIVATE):
            return None if self.allow_private else "a loopback or private address"
        if address.is_reserved or not address.is_global:
            return "a reserved or non-public address"
        return None

    def resolve(self, host: str, port: int) -> list[Address]:
        """Every address `host` resolves to, all of them allowed, or AddressRefused."""
        return self.allowed(host, _resolve(host, port))

    def allowed(self, host: str, addresses: list[Address]) -> list[Address]:
        if not addresses:
            raise AddressRefused(f"{host} does not resolve")
        for address in addresses:
            reason = self.refusal(address)
            if reason is not None:
                raise AddressRefused(f"{host} resolves to {reason}")
        return addresses

    def check_url(self, url: str, field: str = "url", tenant: str = "") -> None:
        """Refuse (RefusedUrl) a URL whose host may not be called now; a name
        that does not resolve in REGISTRATION_RESOLVE_SECONDS raises
        ResolveTimeout, one of a tenant whose lookups are all under way
        ResolverBusy."""
        host, port = _target(url, field)
        literal = _literal(host)
        if literal is not None:
            return self._judge(field, host, [literal])
        try:
            found = resolver.lookup(tenant, host, port, REGISTRATION_RESOLVE_SECONDS)
        except (ResolveTimeout, ResolverBusy) as exc:
            exc.field = field
            raise
        self._judge(field, host, found)

    async def check_url_async(self, url: str, field: str = "url", tenant: str = "") -> None:
        """:meth:`check_url` for the API: waiting for the name holds no thread."""
        host, port = _target(url, field)
        literal = _literal(host)
        if literal is not None:
            return self._judge(field, host, [literal])
        try:
            found = await resolver.lookup_async(tenant, host, port, REGISTRATION_RESOLVE_SECONDS)
        except (ResolveTimeout, ResolverBusy) as exc:
            exc.field = field
            raise
        self._judge(field, host, found)

    def _judge(self, field: str, host: str, addresses: list[Address]) -> None:
        try:
            self.allowed(host, addresses)
        except AddressRefused as refused:
            raise RefusedUrl(field, str(refused)) from None


def _target(url: str, field: str) -> tuple[str, int]:
    """The ASCII (IDNA-encoded) host and the port a URL will connect to."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):  # IDNA errors are ValueErrors too
        raise RefusedUrl(field, "is not a valid URL") from None
    host = parsed.raw_host.decode("ascii", "replace")
    if parsed.scheme not in ("http", "https") or not host:
        raise RefusedUrl(field, "must be an http(s) URL with a host")
    if parsed.userinfo:
        raise RefusedUrl(field, "must not carry credentials")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if not 0 < port < 65536:
        raise RefusedUrl(field, "has no valid port")
    return host, port


def _literal(host: str) -> Address | None:
    try:
        return ip_address(host.strip("[]"))
    except ValueError:
        return None


def _embedded_ipv4(address: Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one carries and is routed to, if any."""
    if not isinstance(address, IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _resolve(host: str, port: int) -> list[Address]:
    """One lookup for the current request's tenant, bounded by its deadline."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        return resolver.lookup(_tenant.get(), host, port, _remaining())
    except ResolveTimeout:
        raise httpcore.ConnectTimeout(DEADLINE_EXCEEDED) from None
    except ResolverBusy:
        raise _LookupsBusy(DNS_BUSY) from None


def _remaining(
    timeout: float | None = None, exceeded: type[Exception] = httpcore.ConnectTimeout
) -> float | None:
    """`timeout`, cut to what is left of this request's deadline."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise exceeded(DEADLINE_EXCEEDED)
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by the request's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _remaining(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _remaining(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        upgraded = self._stream.start_tls(ssl_context, server_hostname, _remaining(timeout))
        return _DeadlineStream(upgraded)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolves once, checks every address, connects to a checked one."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        failure: Exception = AddressRefused(f"{host} does not resolve")
        for address in self._policy.resolve(host, port):
            try:
                stream = self._sockets.connect_tcp(
                    str(address), port, _remaining(timeout), local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            return _DeadlineStream(stream)
        raise failure

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _GuardedTransport(httpx.HTTPTransport):
    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__(trust_env=False)
        # httpx 0.28 (pinned) has no public way to hand its transport a
        # network backend; httpcore's pool takes one publicly.
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=20,
            max_keepalive_connections=0,  # each request connects, so each is checked
            network_backend=_GuardedBackend(policy),
        )


@dataclass(frozen=True)
class Answer:
    status_code: int
    body: bytes


class OutboundClient:
    """POSTs to tenant-chosen URLs under the address policy, each within
    `deadline_seconds` overall, reading at most `max_response_bytes`."""

    def __init__(
        self,
        policy: AddressPolicy,
        deadline_seconds: float,
        max_response_bytes: int = 64 * 1024,
    ) -> None:
        self.deadline_seconds = deadline_seconds
        self.max_response_bytes = max_response_bytes
        self._client = httpx.Client(
            transport=_GuardedTransport(policy),
            timeout=deadline_seconds,
            follow_redirects=False,  # a redirect could lead anywhere
            trust_env=False,  # a proxy would connect on our behalf, unchecked
        )

    def post(
        self, url: str, content: bytes, headers: Mapping[str, str], tenant: str = ""
    ) -> Answer:
        """POST for `tenant`, whose lookups are capped apart from others'."""
        token = _deadline.set(time.monotonic() + self.deadline_seconds)
        owner = _tenant.set(tenant)
        try:
            request_headers = {**headers, "accept-encoding": "identity"}
            with self._client.stream(
                "POST", url, content=content, headers=request_headers
            ) as response:
                body = bytearray()
                for chunk in response.iter_raw():
                    body += chunk
                    if len(body) > self.max_response_bytes:
                        raise OutboundError(RESPONSE_TOO_LARGE)
                return Answer(response.status_code, bytes(body))
        except httpx.HTTPError as exc:
            raise OutboundError(_code(exc)) from None
        finally:
            _tenant.reset(owner)
            _deadline.reset(token)

    def close(self) -> None:
        self._client.close()


def _code(exc: httpx.HTTPError) -> str:
    if isinstance(exc.__cause__, AddressRefused):
        return URL_NOT_ALLOWED
    if isinstance(exc.__cause__, _LookupsBusy):
        return DNS_BUSY
    if isinstance(exc, httpx.TimeoutException):  # no step may outlast the deadline
        return DEADLINE_EXCEEDED
    return type(exc).__name__
