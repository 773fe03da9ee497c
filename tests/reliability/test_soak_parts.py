"""The soak's own parts (issue #43), pure: which providers a switch moves
each channel to, how urgent latency is read from the ledger, and how peak
memory is summed up by role."""

from __future__ import annotations

import ipaddress
import itertools
import os
import uuid
from datetime import UTC, datetime

from harness.netns import Host, Topology
from harness.pgbouncer import through
from harness.reliability import invariants as inv
from harness.reliability.bigjob import urgent_latency
from harness.reliability.memory import PeakMemory, high_water_kib
from harness.reliability.placement import WORKER_HOSTS, Placement
from harness.reliability.switching import rotation
from harness.wires import WIRED
from psycopg.conninfo import conninfo_to_dict


def test_each_switch_moves_each_channel_to_its_next_wired_provider() -> None:
    specs = list(itertools.islice(rotation("sms=twilio,email=sendgrid"), 4))
    sms = sorted(name for name, channel in WIRED.items() if channel == "sms")
    email = sorted(name for name, channel in WIRED.items() if channel == "email")
    assert specs[0] != "sms=twilio,email=sendgrid"
    for spec, after in itertools.pairwise(["sms=twilio,email=sendgrid", *specs]):
        was = dict(part.split("=") for part in spec.split(","))
        now = dict(part.split("=") for part in after.split(","))
        assert now["sms"] == sms[(sms.index(was["sms"]) + 1) % len(sms)]
        assert now["email"] == email[(email.index(was["email"]) + 1) % len(email)]


def test_a_channel_without_a_wire_moves_to_the_first_wired_provider() -> None:
    first = next(rotation("sms=sns,email=ses"))
    assert first.startswith("sms=") and "sns" not in first and "ses" not in first


def _at(seconds: float) -> str:
    return datetime.fromtimestamp(1_900_000_000 + seconds, UTC).isoformat()


def test_urgent_latency_is_from_the_create_to_the_first_request_of_the_first_attempt() -> None:
    ids = [uuid.uuid4() for _ in range(4)]
    attempts = [{"intent_id": i, "n": 1, "attempt_key": f"k{n}"} for n, i in enumerate(ids)]
    attempts.append({"intent_id": ids[0], "n": 2, "attempt_key": "k0-again"})
    ledger = [
        {"idempotency_key": "k0", "received_at": _at(3.0)},  # a retry of the same key:
        {"idempotency_key": "k0", "received_at": _at(1.5)},  # the first request counts
        {"idempotency_key": "k0-again", "received_at": _at(0.1)},  # another attempt: not
        {"idempotency_key": "k1", "received_at": _at(0.2)},
        {"idempotency_key": "k2", "received_at": _at(4.0)},
    ]  # ids[3] never reached the provider
    s = inv.Snapshot(
        now=datetime.now(UTC),
        intents=[],
        attempts=attempts,
        transitions=[],
        observations=[],
        ledger_before=ledger,
        ledger_after=ledger,
        receipts=[],
        job_counts={},
        metric_counts=None,
    )
    created = [(1_900_000_000.0, str(i)) for i in ids]
    found = urgent_latency(created, s)
    assert (found["created"], found["reached_provider"]) == (4, 3)
    assert (found["p50_s"], found["p99_s"], found["max_s"]) == (1.5, 4.0, 4.0)


def test_peak_memory_keeps_each_processes_highest_mark_and_each_roles_largest() -> None:
    peaks = PeakMemory()
    peaks.peaks_kib = {"worker-1": 100 * 1024, "worker-12": 300 * 1024, "api": 200 * 1024}
    peaks.sample({"gone": 2**22 + 7})  # no such process: nothing recorded
    assert peaks.summary()["by_role_mib"] == {"api": 200.0, "worker": 300.0}
    assert "gone" not in peaks.summary()["by_process_mib"]
    mine = high_water_kib(os.getpid())
    assert mine is not None and mine > 1024


def test_a_url_through_pgbouncer_asks_for_no_session_attributes() -> None:
    """PgBouncer replays its first server's startup parameters: a demoted
    member's `in_hot_standby=on` made libpq refuse a primary behind it."""
    url = "host=h1,h2 port=1,2 dbname=d user=u target_session_attrs=read-write"
    pooled = conninfo_to_dict(through(url, 6432))
    assert "target_session_attrs" not in pooled
    assert (pooled["host"], pooled["port"], pooled["dbname"]) == ("127.0.0.1", "6432", "d")


def _placement() -> Placement:
    subnet = ipaddress.ip_network("10.226.9.0/24")
    topo = Topology("t", "tbt", subnet)
    hosts = [Host(name, f"tdg-t-{name}", f"10.226.9.{20 + i}", f"tv{i}") for i, name in
             enumerate(WORKER_HOSTS)]  # fmt: skip
    return Placement(topo, [], hosts)


def test_workers_go_to_each_host_in_turn_and_never_to_one_cut_off() -> None:
    placement = _placement()
    assert [placement.worker_host().name for _ in range(4)] == [*WORKER_HOSTS, WORKER_HOSTS[0]]
    placement.down.add("worker-2")
    chosen = [placement.worker_host().name for _ in range(6)]
    assert "worker-2" not in chosen and set(chosen) == {"worker-1", "worker-3"}
    assert placement.summary()["worker_starts"] == {"worker-1": 5, "worker-2": 1, "worker-3": 4}


def test_the_hosts_reach_loopback_servers_on_the_bridge_address() -> None:
    """The members and PgBouncer listen on loopback and on the bridge: a host
    reaches them at the bridge's address, with every other parameter kept."""
    url = "host=127.0.0.1,127.0.0.1,/tmp/s port=1,2,3 dbname=d target_session_attrs=read-write"
    seen = conninfo_to_dict(_placement().from_hosts(url))
    assert seen["host"] == "10.226.9.1,10.226.9.1,/tmp/s"
    assert (seen["port"], seen["dbname"], seen["target_session_attrs"]) == (
        "1,2,3",
        "d",
        "read-write",
    )
