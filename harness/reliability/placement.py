"""The soak's hosts (issue #43): two API hosts and three worker hosts, each
a network namespace on one bridge (harness/netns.py), as a deployment that
has outgrown one machine runs them. What they share stays in the root
namespace and listens on the bridge's address as well: the Patroni
members, PgBouncer and the provider simulator. The harness itself, the
relay that hands the simulator's receipts to the APIs in turn, and the
checks stay there too and reach the hosts over the bridge.

A worker host can be cut off (`host_cut`): its interface goes down, so
whatever its workers were doing with PgBouncer, PostgreSQL or the provider
goes silent mid-way, no reset, no goodbye. After CUT_S its workers are
SIGKILLed, as on a host that never came back, and its interface goes up
again for the workers started there later. Their leases run out meanwhile;
nothing they held may be lost or sent twice.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from harness.netns import Host, Topology, topology

from .faults import Injector, Skipped

API_HOSTS = ("api-1", "api-2")
WORKER_HOSTS = ("worker-1", "worker-2", "worker-3")
KIND = "host_cut"
# Every five minutes of an hour's soak; a shorter soak has one.
PERIOD_S = 300.0
# Longer than a lease (8 s): the host's claims are taken over while it is away.
CUT_S = 15.0
LOOPBACK = ("127.0.0.1", "localhost")


@dataclass
class Placement:
    topo: Topology
    apis: list[Host]
    workers: list[Host]
    down: set[str] = field(default_factory=set)  # worker hosts cut off now
    started: Counter[str] = field(default_factory=Counter)  # worker starts by host
    _turn: int = 0

    @property
    def address(self) -> str:
        """Where the shared services listen for the hosts: the bridge's address."""
        return self.topo.gateway

    @property
    def bridge(self) -> tuple[str, str]:
        """(address, network): where the members listen too, whom they trust."""
        return self.topo.gateway, str(self.topo.subnet)

    def worker_host(self) -> Host:
        """The next worker host that is up, in turn."""
        up = [h for h in self.workers if h.name not in self.down]
        host = up[self._turn % len(up)]
        self._turn += 1
        self.started[host.name] += 1
        return host

    def from_hosts(self, url: str) -> str:
        """A DSN naming loopback servers, as the hosts reach the same ones."""
        params = conninfo_to_dict(url)
        hosts = str(params.get("host", "")).split(",")
        params["host"] = ",".join(self.address if h in LOOPBACK else h for h in hosts)
        return make_conninfo("", **params)

    def summary(self) -> dict[str, object]:
        return {
            "apis": {h.name: h.address for h in self.apis},
            "workers": {h.name: h.address for h in self.workers},
            "worker_starts": dict(sorted(self.started.items())),
            "shared_services_on": self.address,
        }


@contextmanager
def placed() -> Iterator[Placement]:
    """The hosts on a bridge of their own; removed after (their processes
    are the caller's to stop first)."""
    with topology() as topo:
        apis = [topo.add_host(name, 10 + i) for i, name in enumerate(API_HOSTS)]
        workers = [topo.add_host(name, 20 + i) for i, name in enumerate(WORKER_HOSTS)]
        yield Placement(topo, apis, workers)


@dataclass
class HostCut:
    placement: Placement
    injector: Injector
    rng: random.Random

    def cut(self) -> str:
        """The `host_cut` fault."""
        fleet = self.injector.fleet
        host = self.rng.choice(self.injector.supervised_until(self._busy_hosts))
        self.placement.down.add(host.name)
        host.cut_off()
        try:
            away_until = time.monotonic() + CUT_S
            while time.monotonic() < away_until:
                self.injector.supervise()  # the other hosts' workers as usual
                time.sleep(0.5)
            victims = [w for w in fleet.live_workers() if w.host == host.name]
            for worker in victims:
                self.injector.kill(worker)
            for worker in victims:
                worker.reaped(within=10)  # SIGKILL needs no network; bounded all the same
        finally:
            host.reconnect()
            self.placement.down.discard(host.name)
        names = ", ".join(w.name for w in victims) or "no worker"
        return f"{host.name} cut off for {CUT_S:.0f} s, then {names} killed on it"

    def _busy_hosts(self) -> list[Host]:
        live = self.injector.live()
        busy = [
            h
            for h in self.placement.workers
            if h.name not in self.placement.down and any(w.host == h.name for w in live)
        ]
        if not busy:
            raise Skipped("no worker host with a live worker")
        return busy
