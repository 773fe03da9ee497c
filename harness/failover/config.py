"""A member's Patroni configuration: the timings that make a failover take
seconds, synchronous replication, and PostgreSQL from the given binaries
on loopback, trusting loopback (harness/failover/cluster.py); and, for
hosts in network namespaces (harness/netns.py), on the bridge's address
too, trusting the hosts' subnet."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.postgres import VANISHED_CLIENTS

if TYPE_CHECKING:
    from harness.failover.cluster import Member

# The leader key lives this long; Patroni looks every second.
TTL_S = 20


def member_config(
    scope: str,
    member: Member,
    etcd_port: int,
    bin_dir: Path,
    bridge: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The Patroni configuration of one member (JSON is YAML). `bridge`: an
    address of this machine's to listen on as well, and the network whose
    clients are trusted there."""
    trusted = ["local all all trust", "host all all 127.0.0.1/32 trust",
               "host replication all 127.0.0.1/32 trust"]  # fmt: skip
    listen = "127.0.0.1"
    parameters = {"unix_socket_directories": str(member.folder)}
    if bridge is not None:
        address, network = bridge
        # Patroni's `listen` takes several hosts before one port
        # (patroni/utils.py, split_host_port); it connects locally to the first.
        listen = f"127.0.0.1,{address}"
        trusted.append(f"host all all {network} trust")
        # A host cut off keeps its connections open here: no reset arrives.
        # Noticed in seconds, not after Linux's two-hour keepalive
        # (docs/scaling.md, "A host that vanishes").
        parameters |= VANISHED_CLIENTS
    return {
        "scope": scope,
        "namespace": "/tidings/",
        "name": member.name,
        "log": {"level": "INFO"},
        "restapi": {
            "listen": f"127.0.0.1:{member.api_port}",
            "connect_address": f"127.0.0.1:{member.api_port}",
        },
        "etcd3": {"hosts": [f"127.0.0.1:{etcd_port}"]},
        "bootstrap": {
            "dcs": {
                "ttl": TTL_S,
                "loop_wait": 1,
                "retry_timeout": 5,
                "primary_start_timeout": 0,
                "synchronous_mode": True,
                "postgresql": {
                    "use_pg_rewind": True,
                    "use_slots": True,
                    "parameters": {
                        "max_connections": 300,
                        "synchronous_commit": "on",
                        "wal_keep_size": "256MB",
                        "hot_standby": "on",
                    },
                },
            },
            "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
        },
        "postgresql": {
            "listen": f"{listen}:{member.pg_port}",
            "connect_address": f"127.0.0.1:{member.pg_port}",
            "data_dir": str(member.data_dir),
            "bin_dir": str(bin_dir),
            "pgpass": str(member.folder / "pgpass"),
            "authentication": {
                "superuser": {"username": "postgres"},
                "replication": {"username": "postgres"},
            },
            "parameters": parameters,
            "pg_hba": trusted,
        },
    }
