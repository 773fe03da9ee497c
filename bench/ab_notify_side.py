"""One side of bench/ab_notify.py, run by an install's own interpreter: a
long-lived `notify` loop on a fresh database, a burst per "go SECONDS"
line on stdin, its rate on stdout. Imports only `tidings`, so any
install, old or new, can run it."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import psycopg

from tidings import Tidings
from tidings.platform.settings import Settings
from tidings.policies import builtin_document

PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
SECRET = "bench-secret-key-0123456789abcdef"


def request(tag: str, i: int) -> dict[str, Any]:
    return {
        "idempotency_key": f"{tag}:{i}",
        "channel": "sms",
        "recipient": {"ref": f"m{i}", "phone": f"+1415555{1000 + i % 9000:04d}"},
        "template": "offer",
        "variables": {"class_name": "Spin", "deadline": "18:00"},
        "purpose": "transactional",
        "event_class": "offer",
    }


def main(name: str, threads: int) -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    url = f"{PG}/{name}"
    t = Tidings(url, secret_key=SECRET, settings=Settings(pool_size=threads + 2))
    t.migrate()
    t.publish_policy(builtin_document("default"))
    t.publish_template(
        "offer", channel="sms", body="{{ class_name }} {{ deadline }}",
        required_variables=["class_name", "deadline"],
    )  # fmt: skip
    for i in range(500):
        t.notify(**request("warm", i))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    print("ready", flush=True)
    made = [0]
    lock = threading.Lock()

    def produce(until: float, counted: list[int]) -> None:
        while time.perf_counter() < until:
            with lock:
                i, made[0] = made[0], made[0] + 1
            t.notify(**request("n", i))
            counted.append(1)

    for line in sys.stdin:
        seconds = float(line.split()[1])
        counted: list[int] = []
        started = time.perf_counter()
        workers = [
            threading.Thread(target=produce, args=(started + seconds, counted))
            for _ in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        print(f"{len(counted) / (time.perf_counter() - started):.1f}", flush=True)
    t.close()
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
