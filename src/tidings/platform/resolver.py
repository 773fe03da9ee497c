"""Looking up the names tenants chose, without lending them a shared thread.

`getaddrinfo` has no timeout, and a tenant controls how long its name
server takes to answer (or never does). So lookups run here, on a pool of
their own; a caller waits for one at most until its deadline, the API
without holding a thread of its pool (:func:`lookup_async`). A lookup
whose caller stopped waiting still holds its thread until the system
resolver gives up, so a tenant may have at most :data:`PER_TENANT` lookups
under way, counting those: more are refused at once (`DNS_BUSY`), and one
tenant's silent name server never holds more than its share of the pool.

    ResolverBusy (DNS_BUSY, 429 at the API): the tenant's lookups are all under way
    ResolveTimeout (DNS_TIMEOUT, 504 at the API): no answer by the deadline
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Final

from tidings.domain.errors import TidingsError

Address = IPv4Address | IPv6Address

# Lookups under way at once, all tenants together; each tenant at most
# PER_TENANT of them: four tenants with silent name servers to fill it.
THREADS: Final[int] = 8
PER_TENANT: Final[int] = 2
DNS_BUSY: Final[str] = "DNS_BUSY"
DNS_TIMEOUT: Final[str] = "DNS_TIMEOUT"


class ResolverBusy(TidingsError):
    """The tenant has PER_TENANT lookups under way already; retry later."""

    code = DNS_BUSY

    def __init__(self, host: str, field: str = "url") -> None:
        super().__init__(f"earlier lookups of this tenant's names are still under way ({host})")
        self.field = field


class ResolveTimeout(TidingsError):
    """The name did not resolve by the request's deadline."""

    code = DNS_TIMEOUT

    def __init__(self, host: str, field: str = "url") -> None:
        super().__init__(f"{host} did not resolve in time")
        self.field = field


def _addresses(host: str, port: int) -> list[Address]:
    # socket.getaddrinfo is looked up at each call: tests replace it.
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    found: list[Address] = []
    for *_, sockaddr in infos:
        address = ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


class ResolverPool:
    """The lookup threads and how many each tenant holds."""

    def __init__(self, threads: int = THREADS, per_tenant: int = PER_TENANT) -> None:
        self.per_tenant = per_tenant
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="resolve")
        self._lock = threading.Lock()
        self._under_way: Counter[str] = Counter()

    def submit(self, tenant: str, host: str, port: int) -> Future[list[Address]]:
        """Start a lookup for `tenant`, or raise ResolverBusy."""
        with self._lock:
            if self._under_way[tenant] >= self.per_tenant:
                raise ResolverBusy(host)
            self._under_way[tenant] += 1
        try:
            future = self._pool.submit(_addresses, host, port)
        except BaseException:
            self._finished(tenant)
            raise
        future.add_done_callback(lambda _: self._finished(tenant))
        return future

    def _finished(self, tenant: str) -> None:
        with self._lock:
            self._under_way[tenant] -= 1
            if self._under_way[tenant] <= 0:
                del self._under_way[tenant]


POOL = ResolverPool()


def lookup(tenant: str, host: str, port: int, timeout: float | None) -> list[Address]:
    """Every address of `host` (empty if it does not resolve), waited for at
    most `timeout` seconds (ResolveTimeout)."""
    future = POOL.submit(tenant, host, port)
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        future.cancel()  # still queued: never started; running: runs out alone
        raise ResolveTimeout(host) from None


async def lookup_async(tenant: str, host: str, port: int, timeout: float) -> list[Address]:
    """:func:`lookup` for a coroutine: the wait holds no thread."""
    future = POOL.submit(tenant, host, port)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
    except TimeoutError:
        raise ResolveTimeout(host) from None
