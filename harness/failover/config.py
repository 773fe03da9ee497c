"""A member's Patroni configuration: the timings that make a failover take
seconds, synchronous replication, and PostgreSQL from the given binaries
on loopback, trusting loopback (harness/failover/cluster.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.failover.cluster import Member

# The leader key lives this long; Patroni looks every second.
TTL_S = 20


def member_config(scope: str, member: Member, etcd_port: int, bin_dir: Path) -> dict[str, Any]:
    """The Patroni configuration of one member (JSON is YAML)."""
    trusted = ["local all all trust", "host all all 127.0.0.1/32 trust",
               "host replication all 127.0.0.1/32 trust"]  # fmt: skip
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
            "listen": f"127.0.0.1:{member.pg_port}",
            "connect_address": f"127.0.0.1:{member.pg_port}",
            "data_dir": str(member.data_dir),
            "bin_dir": str(bin_dir),
            "pgpass": str(member.folder / "pgpass"),
            "authentication": {
                "superuser": {"username": "postgres"},
                "replication": {"username": "postgres"},
            },
            "parameters": {"unix_socket_directories": str(member.folder)},
            "pg_hba": trusted,
        },
    }
