"""Several "hosts" on this machine: Linux network namespaces on one bridge.

Each host is a network namespace with one veth interface (`eth0`) plugged
into a bridge in the root namespace. The bridge holds the subnet's first
address, where PostgreSQL and the simulator listen; the hosts have their
own addresses and loopback, and nothing else. A process runs on a host
through `ip netns exec`, so cutting a host off is taking its `eth0` down:
its packets go nowhere, no connection is reset, exactly a host whose cable
was pulled.

Names carry a random tag and the subnet is the first 10.226.X.0/24 no
interface uses (chosen under a lock, as two CI passes build one each at
once), so a leftover from a killed run never collides with the next one.
Needs root (CAP_NET_ADMIN): `require_root` says so, or skips.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

LOCK = Path("/run/lock/tidings-netns.lock")
SUBNETS = (ipaddress.ip_network(f"10.226.{n}.0/24") for n in range(1, 255))


def require_root() -> None:
    """Fail where peers are required (CI), skip elsewhere."""
    if os.geteuid() == 0 and shutil.which("ip"):
        return
    reason = "network namespaces need root and iproute2"
    if os.environ.get("TIDINGS_REQUIRE_PEERS"):
        pytest.fail(reason)
    pytest.skip(reason)


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, timeout=30)


@dataclass
class Host:
    name: str  # the test's name for it: api-1, worker-2
    netns: str
    address: str
    root_veth: str

    def command(self, *argv: str) -> list[str]:
        """`argv` as run on this host."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def cut_off(self) -> None:
        """Its interface down: every connection it has just stops."""
        ip("netns", "exec", self.netns, "ip", "link", "set", "eth0", "down")

    def reconnect(self) -> None:
        """Its interface up again: packets to and from it flow; a peer that
        still holds a connection of a process gone meanwhile gets a reset."""
        ip("netns", "exec", self.netns, "ip", "link", "set", "eth0", "up")


@dataclass
class Topology:
    tag: str
    bridge: str
    subnet: ipaddress.IPv4Network
    hosts: dict[str, Host] = field(default_factory=dict)

    @property
    def gateway(self) -> str:
        """The root namespace's address on the bridge: PostgreSQL, the simulator."""
        return str(self.subnet.network_address + 1)

    def add_host(self, name: str, last_octet: int) -> Host:
        index = len(self.hosts)
        host = Host(
            name=name,
            netns=f"tdg-{self.tag}-{name}",
            address=str(self.subnet.network_address + last_octet),
            root_veth=f"tv{self.tag}{index:02d}",
        )
        peer = f"tp{self.tag}{index:02d}"
        ip("netns", "add", host.netns)
        self.hosts[name] = host  # from here on, teardown removes it
        ip("link", "add", host.root_veth, "type", "veth", "peer", "name", peer)
        ip("link", "set", peer, "netns", host.netns)
        ip("link", "set", host.root_veth, "master", self.bridge, "up")
        inside = ("netns", "exec", host.netns, "ip")
        ip(*inside, "link", "set", peer, "name", "eth0")
        ip(*inside, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
        ip(*inside, "link", "set", "eth0", "up")
        ip(*inside, "link", "set", "lo", "up")
        return host

    def remove(self) -> None:
        for host in self.hosts.values():
            # The namespace's processes are gone by now (the caller kills them
            # first); deleting it destroys its end of the veth pair, and so both.
            ip("netns", "del", host.netns, check=False)
            ip("link", "del", host.root_veth, check=False)
        ip("link", "del", self.bridge, check=False)


def _used_subnets() -> set[ipaddress.IPv4Network]:
    out = ip("-4", "-o", "addr", "show").stdout.decode()
    used = set()
    for line in out.splitlines():
        cidr = line.split()[3]
        used.add(ipaddress.ip_interface(cidr).network)
    return used


@contextmanager
def topology() -> Iterator[Topology]:
    """A bridge on a free subnet; hosts added with `add_host`; all removed after."""
    tag = secrets.token_hex(3)
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs must not pick one subnet
        used = _used_subnets()
        subnet = next(s for s in SUBNETS if not any(s.overlaps(u) for u in used))
        topo = Topology(tag=tag, bridge=f"tb{tag}", subnet=subnet)
        ip("link", "add", topo.bridge, "type", "bridge")
        try:
            gateway = f"{topo.gateway}/{subnet.prefixlen}"
            ip("addr", "add", gateway, "dev", topo.bridge)
            ip("link", "set", topo.bridge, "up")
        except BaseException:
            topo.remove()
            raise
    try:
        yield topo
    finally:
        topo.remove()
