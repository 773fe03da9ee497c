"""A big bulk job beside a stream of urgent single intents (issue #43).

Invariant 13: urgent never waits behind bulk. While a job of many
recipients (100,000 in the hour's soak) is prepared and dispatched, single
intents keep arriving over HTTP, and the report gives their latency from
the create request to the provider's receipt of the call (p50 and p99),
read from the simulator's ledger, not from what the workers believe.

Its recipients are unique and plain (delivered destinations, no deadline)
so that the job measures throughput and fairness, not the magic failures
the rest of the load already plays; a quarter are SMS, the rest e-mail.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from .invariants import Snapshot
from .processes import call
from .retry import retrying
from .workload import TEMPLATE, Workload

# The job is done once none of its intents is due or in flight.
UNFINISHED_SQL = """
SELECT (SELECT status FROM jobs WHERE id = %(job)s) AS status,
       (SELECT count(*) FROM intents WHERE job_id = %(job)s
          AND state IN ('pending', 'resend_due', 'sending')) AS unsent
"""


def audience(size: int, tag: str) -> Iterator[dict[str, Any]]:
    """Generated as it is staged, never held whole (`Tidings.create_job`)."""
    for i in range(size):
        member: dict[str, Any] = {"ref": f"big-{tag}-{i}"}
        if i % 4 == 0:
            member["phone"] = f"+1415558{1000 + i // 4 % 9000:04d}"
        else:
            member["email"] = f"big{i}@example.org"
        yield member


@dataclass
class BigJob:
    work: Workload
    size: int
    job_id: str | None = None
    created_s: float | None = None  # how long creating it took
    failure: str = ""
    # (wall-clock time the create was sent, intent id) of each urgent single.
    urgent: list[tuple[float, str]] = field(default_factory=list)
    urgent_refused: int = 0
    _n: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def create(self) -> None:
        started = time.monotonic()
        request = {
            "idempotency_key": f"rel:{self.work.tag}:bigjob",
            "event_class": "big_digest",
            "purpose": "transactional",
            "template": TEMPLATE,
            "channels": ["email", "sms"],
            # "all": an intent per channel with a destination, and each member has one;
            # "preferred" would exclude the SMS quarter (no e-mail).
            "channel_mode": "all",
            "variables": {"name": "reader", "booking": "BIG"},
        }
        try:
            # A failover during the staging fails the transaction; the key
            # makes the next try the same job.
            job = retrying(
                lambda: self.work.t.create_job(
                    **request, audience=audience(self.size, self.work.tag)
                )
            )
        except Exception as exc:  # reported, and the run goes on without it
            self.failure = f"{type(exc).__name__}: {exc}"
            return
        self.job_id = str(job["id"])
        self.created_s = round(time.monotonic() - started, 1)
        with self.work._lock:
            self.work.jobs.append(self.job_id)
            self.work.created["big_job_recipients"] += self.size

    def urgent_one(self) -> None:
        """One single intent over HTTP to a destination that delivers."""
        with self._lock:
            self._n += 1
            n = self._n
        body = {
            "idempotency_key": f"rel:{self.work.tag}:urgent:{n}",
            "channel": "sms" if n % 2 else "email",
            "recipient": {"ref": f"urgent-{n}"},
            "template": {"name": TEMPLATE},
            "variables": {"name": f"U{n}", "booking": f"U{n}"},
            "purpose": "transactional",
            "event_class": "urgent_notice",
        }
        body["recipient"]["phone" if n % 2 else "email"] = (
            f"+1415555{100 + n % 300:04d}" if n % 2 else f"urgent{n}@example.org"
        )
        sent_at = time.time()
        auth = {"Authorization": f"Bearer {self.work.api_key}"}
        answer = call("POST", f"{self.work.api()}/v1/intents", json=body, headers=auth)
        if answer is None or answer.status_code != 201:
            with self._lock:
                self.urgent_refused += 1
            return
        intent_id = str(answer.json()["id"])
        with self._lock:
            self.urgent.append((sent_at, intent_id))
        with self.work._lock:
            self.work.created["urgent"] += 1
            self.work.acknowledged.add(intent_id)

    def unfinished(self, db_url: str) -> int | None:
        """The job's intents not yet sent or settled; None if it could not be made."""
        if self.job_id is None:
            return None if self.failure else self.size
        with psycopg.connect(db_url, connect_timeout=5) as conn:
            row = conn.execute(UNFINISHED_SQL, {"job": self.job_id}).fetchone()
        if row is None or row[0] in (None, "preparing"):
            return self.size
        return int(row[1])

    def wait_finished(self, db_url: str, timeout: float) -> float | None:
        """Seconds until the job had nothing left to send; None: not in time."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                if self.unfinished(db_url) in (0, None):
                    return round(time.monotonic() - started, 1)
            except psycopg.OperationalError:
                pass  # a fault's aftermath; bounded by the timeout
            time.sleep(2.0)
        return None

    def report(self, s: Snapshot) -> dict[str, Any]:
        job = [i for i in s.intents if self.job_id and str(i["job_id"]) == self.job_id]
        states: dict[str, int] = {}
        for i in job:
            states[i["state"]] = states.get(i["state"], 0) + 1
        return {
            "recipients": self.size,
            "job_id": self.job_id,
            "created_s": self.created_s,
            "failure": self.failure,
            "intents_by_state": dict(sorted(states.items(), key=lambda kv: -kv[1])),
            "urgent": urgent_latency(self.urgent, s),
            "urgent_refused": self.urgent_refused,
        }


def urgent_latency(urgent: list[tuple[float, str]], s: Snapshot) -> dict[str, Any]:
    """From each urgent create to its first request at the provider."""
    first_key = {str(a["intent_id"]): a["attempt_key"] for a in s.attempts if a["n"] == 1}
    arrived: dict[str, float] = {}
    for entry in s.ledger_after:
        at = datetime.fromisoformat(entry["received_at"]).timestamp()
        key = entry["idempotency_key"]
        arrived[key] = min(at, arrived.get(key, at))
    seconds = sorted(
        arrived[first_key[i]] - sent
        for sent, i in urgent
        if i in first_key and first_key[i] in arrived
    )
    return {
        "created": len(urgent),
        "reached_provider": len(seconds),
        "p50_s": _quantile(seconds, 0.50),
        "p99_s": _quantile(seconds, 0.99),
        "max_s": round(seconds[-1], 3) if seconds else None,
    }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)
