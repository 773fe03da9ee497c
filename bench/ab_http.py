"""Before and after, in one run: `POST /v1/intents` through `tidings serve`
of two installs, alternating, each on a fresh, analysed database.

    python -m bench.ab_http --before /path/to/old/.venv/bin/python \\
        --after .venv/bin/python [--repetitions 3] [--seconds 6] [--client stdlib]

Each install's interpreter runs its own `tidings serve`; the library
`notify` of this checkout is measured in the same run for the ratio. Uses
the PostgreSQL at `BENCH_PG` (postgresql://postgres@127.0.0.1:5432).
Prints medians; asserts nothing. Client and server are pinned apart
(bench/pinning.py), as in `python -m bench`.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import statistics
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg

from bench.pinning import CLIENT, SERVER, note, pinned
from tidings import Tidings
from tidings.cli.devstack import free_port
from tidings.policies import builtin_document
from tidings.store import api_keys

SECRET = "bench-secret-key-0123456789abcdef"
PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
WARM = 300


def body(tag: str, i: int) -> dict[str, Any]:
    return {
        "idempotency_key": f"{tag}:{i}",
        "channel": "sms",
        "recipient": {"ref": f"m{i}", "phone": "+14155550123"},
        "template": "offer",
        "variables": {"n": "1"},
        "purpose": "transactional",
        "event_class": "offer",
    }


def fresh(name: str) -> tuple[str, str]:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    url = f"{PG}/{name}"
    with Tidings(url, secret_key=SECRET) as t:
        t.migrate()
        t.publish_policy(builtin_document("default"))
        t.publish_template("offer", channel="sms", body="Spot {{ n }}", required_variables=["n"])
        with t.db.transaction() as conn:
            _, key = api_keys.create_key(conn, t.tenant, ["send", "read"], "ab", vault=t.vault)
        for i in range(WARM):
            t.notify(**body("warm", i))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    return url, key


def drop(name: str) -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def poster(base: str, key: str, client: str) -> Iterator[Callable[[dict[str, Any]], int]]:
    """POST /v1/intents on one keep-alive HTTP/1.1 connection: the status.

    `httpx` is what the bench has always used; `stdlib` (http.client) does
    the same exchange for about a third of httpx's CPU, which on a 2-core
    machine is taken from the server it measures (docs/benchmarks.md, "The
    HTTP path, profiled")."""
    headers = {"Authorization": f"Bearer {key}"}
    if client == "httpx":
        with httpx.Client(base_url=base, headers=headers, timeout=30) as session:
            yield lambda payload: session.post("/v1/intents", json=payload).status_code
        return
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    headers["Content-Type"] = "application/json"

    def post(payload: dict[str, Any]) -> int:
        conn.request("POST", "/v1/intents", body=json.dumps(payload).encode(), headers=headers)
        reply = conn.getresponse()
        reply.read()  # the whole answer, as httpx reads it
        return int(reply.status)

    try:
        yield post
    finally:
        conn.close()


def drive(base: str, key: str, clients: int, tag: str, seconds: float, client: str) -> float:
    done = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def post(worker: int) -> None:
        with poster(base, key, client) as send:
            i = worker
            while time.perf_counter() < deadline:
                if send(body(tag, i)) == 201:
                    with lock:
                        done[0] += 1
                i += clients

    started = time.perf_counter()
    threads = [threading.Thread(target=post, args=(w,)) for w in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done[0] / (time.perf_counter() - started)


def http_once(
    python: str, clients: int, workers: int, name: str, seconds: float, client: str
) -> float:
    url, key = fresh(name)
    port = free_port()
    command = [python, "-m", "tidings.cli", "serve", "--port", str(port)]
    if workers > 1:
        command += ["--workers", str(workers)]
    env = {**os.environ, "DATABASE_URL": url, "TIDINGS_SECRET_KEY": SECRET,
           "TIDINGS_POOL_SIZE": str(clients + 4)}  # fmt: skip
    with pinned(SERVER):  # as `python -m bench` runs every HTTP measure
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/"
        )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        time.sleep(1.0 if workers == 1 else 3.0)  # the other processes, a moment behind
        with pinned(CLIENT):
            return drive(base, key, clients, name, seconds, client)
    finally:
        process.terminate()
        process.wait(20)
        drop(name)


def notify_once(name: str, seconds: float) -> float:
    url, _ = fresh(name)
    try:
        with Tidings(url, secret_key=SECRET) as t:
            started, done = time.perf_counter(), 0
            while time.perf_counter() - started < seconds:
                t.notify(**body("lib", done))
                done += 1
            return done / (time.perf_counter() - started)
    finally:
        drop(name)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab_http", description=__doc__)
    parser.add_argument("--before", required=True, help="the old install's python")
    parser.add_argument("--after", required=True, help="the new install's python")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--client", choices=("httpx", "stdlib"), default="httpx",
                        help="the HTTP client of the 1 or 8 client threads")  # fmt: skip
    args = parser.parse_args()
    cases = [("before", 1, 1), ("after", 1, 1), ("before", 8, 1), ("after", 8, 1),
             ("before", 8, 2), ("after", 8, 2)]  # fmt: skip
    # Absolute: the servers run from / (so neither install's checkout shadows
    # the other's package), where `.venv/bin/python` would name nothing.
    pythons = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    rates: dict[tuple[str, int, int], list[float]] = {c: [] for c in cases}
    library = []
    for rep in range(args.repetitions):
        library.append(notify_once(f"ab_library_{rep}", args.seconds))
        for variant, clients, workers in cases:
            name = f"ab_{variant}_{clients}_{workers}_{rep}"
            rate = http_once(pythons[variant], clients, workers, name, args.seconds, args.client)
            rates[(variant, clients, workers)].append(rate)
    base = statistics.median(library)
    print(note())
    print(f"library notify: {base:.0f}/s")
    for (variant, clients, workers), values in rates.items():
        median = statistics.median(values)
        print(f"{variant:6} {clients} client(s), --workers {workers}: {median:.0f}/s, "
              f"{median / base:.2f}x notify  {[round(v) for v in values]}")  # fmt: skip


if __name__ == "__main__":
    main()
