"""What a run asks of tidings: intents through the library (floods in one
transaction each) and over HTTP (a steady trickle, with replays of the same
key), bulk jobs, and cancellations racing the workers.

Recipients are drawn from the simulator's magic destinations in fixed
shares, so every run exercises undelivered receipts (resends), permanent
failures, rejections, 429s, 5xx and stalled answers, whatever the global
fault rates are at the moment. An SMS number's magic is its last four
digits and its exchange varies, so no number gathers more messages than a
real recipient's would and a provider's search by number can still find
one. Deadlines are drawn so that many fall due while the run is under way.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tidings import Tidings
from tidings.policies import builtin_document
from tidings.store.api_keys import create_key

from .hostile import RIVAL_TENANT, Hostile
from .processes import call
from .retry import retrying

TEMPLATE = "rel_notice"
BODY = "Hello {{ name }}, your booking {{ booking }} is confirmed."
# (kind, share in percent, channel, destination, always a near deadline).
# Stalled answers are kept rare: each holds a worker's send slot for the
# adapter's whole 10 s timeout (see "Findings" in docs/reliability.md).
PROFILES: tuple[tuple[str, float, str, str, bool], ...] = (
    ("sms_ok", 42.0, "sms", "+1415{nxx}{n4}", False),
    ("email_ok", 27.0, "email", "member{n}@example.org", False),
    ("sms_undelivered", 7.0, "sms", "+1415{nxx}0001", False),
    ("email_bounce", 5.0, "email", "bounce+{n}@example.org", False),
    ("sms_failed", 3.0, "sms", "+1415{nxx}0002", False),
    ("sms_invalid", 3.0, "sms", "+1415{nxx}0000", False),
    ("sms_stall", 0.7, "sms", "+1415{nxx}0408", False),
    ("email_stall", 0.3, "email", "timeout+{n}@example.org", False),
    ("sms_5xx", 2.0, "sms", "+1415{nxx}0500", True),
    ("sms_429", 1.5, "sms", "+1415{nxx}0429", True),
)
RIVAL_SHARE = 0.2  # of the HTTP trickle, created again by the rival tenant
# Long enough to outlive a flood's own transaction, short enough to pass mid-run.
NEAR_DEADLINE_S = (15.0, 60.0)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Workload:
    t: Tidings
    api_url: str
    rng: random.Random
    tag: str  # makes this run's idempotency keys unique
    # Every API host's address (the soak has two), called in turn; none:
    # `api_url` alone.
    api_urls: list[str] = field(default_factory=list)
    api_key: str = ""
    # A second tenant that reuses the first one's idempotency keys over HTTP:
    # each must get its own sends and receipts (invariant 11).
    rival_key: str = ""
    # The rival turned hostile (issues #39, #43): hostile.py.
    hostile: Hostile | None = None
    created: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)
    recent: list[tuple[float, str]] = field(default_factory=list)  # (created, intent id)
    acknowledged: set[str] = field(default_factory=set)  # every create answered or committed
    jobs: list[str] = field(default_factory=list)
    _n: int = 0
    _calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def api(self) -> str:
        """The API to call next: each host in turn, as a load balancer would."""
        urls = self.api_urls or [self.api_url]
        with self._lock:
            self._calls += 1
            return urls[self._calls % len(urls)]

    def prepare(self) -> None:
        # A tenant with no published policy is denied everything
        # (POLICY_MISSING): both publish the shipped example, as a user would.
        self.t.publish_policy(builtin_document("default"))
        self.t.for_tenant(RIVAL_TENANT).publish_policy(builtin_document("default"))
        self.t.publish_template(
            TEMPLATE, channel="sms", body=BODY, required_variables=["name", "booking"]
        )
        self.t.publish_template(
            TEMPLATE,
            channel="email",
            subject="Booking {{ booking }}",
            body=BODY,
            required_variables=["name", "booking"],
        )
        with self.t.db.transaction() as conn:
            _, self.api_key = create_key(
                conn,
                self.t.tenant,
                ("send", "read", "admin", "webhook"),
                "reliability",
                vault=self.t.vault,
            )
        rival = self.t.for_tenant(RIVAL_TENANT)
        for channel in ("sms", "email"):
            subject = "Booking {{ booking }}" if channel == "email" else None
            rival.publish_template(
                TEMPLATE,
                channel=channel,
                subject=subject,
                body=BODY,
                required_variables=["name", "booking"],
            )
        with self.t.db.transaction() as conn:
            _, self.rival_key = create_key(
                conn, RIVAL_TENANT, ("send", "read"), "rival", vault=self.t.vault
            )
            _, admin_key = create_key(
                conn, RIVAL_TENANT, ("send", "admin"), "rival admin", vault=self.t.vault
            )
        self.hostile = Hostile(self.t, self.api, admin_key, self.tag, self._count)

    # --- creating --------------------------------------------------------

    def request(self, rng: random.Random | None = None) -> tuple[str, dict[str, Any]]:
        """One intent request, drawn from the profiles; keys are never reused."""
        rng = rng or self.rng
        with self._lock:
            self._n += 1
            n = self._n
        kind, _, channel, pattern, near = rng.choices(PROFILES, [p[1] for p in PROFILES])[0]
        to = pattern.format(n=n, n4=f"{100 + n % 300:04d}", nxx=200 + n // 300 % 800)
        recipient: dict[str, Any] = {"ref": f"member-{n}"}
        recipient["phone" if channel == "sms" else "email"] = to
        body: dict[str, Any] = {
            "idempotency_key": f"rel:{self.tag}:{n}",
            "channel": channel,
            "recipient": recipient,
            "template": TEMPLATE,
            "variables": {"name": f"M{n}", "booking": f"B{n}"},
            "purpose": "transactional",
            "event_class": "booking_notice",
        }
        draw = rng.random()
        if near or draw < 0.25:
            body["expires_at"] = utcnow() + timedelta(seconds=rng.uniform(*NEAR_DEADLINE_S))
        elif draw < 0.75:
            body["expires_at"] = utcnow() + timedelta(hours=1)
        budget = rng.random()
        if budget < 0.15:
            body["resend_budget"] = 0
        elif budget < 0.30:
            body["resend_budget"] = 2
        return kind, body

    def flood(self, size: int) -> int:
        """`size` intents in one library transaction: a burst the workers cannot
        drain at once, committed (and announced by NOTIFY) all together."""
        made: list[tuple[str, dict[str, Any]]] = []

        def create() -> list[Any]:
            # Each request drawn right before its create, and again on each
            # try: on a loaded machine a flood's transaction outlasts the
            # nearest deadlines (15 s) of requests drawn at its start, and a
            # failover's wait outlasts them all; the create refuses a past
            # one. A try whose commit did happen leaves an unacknowledged flood.
            made.clear()
            intents = []
            with self.t.db.transaction() as conn:
                for _ in range(size):
                    made.append(self.request())
                    intents.append(self.t.notify(conn=conn, **made[-1][1]))
            return intents

        intents = retrying(create)
        self._remember([(kind, str(i.id)) for (kind, _), i in zip(made, intents, strict=True)])
        return size

    def create_over_http(self, rng: random.Random, replay: bool) -> str | None:
        """One intent through the API; with `replay`, the same request again
        must answer 200 with the very same intent."""
        kind, body = self.request(rng)
        wire = {**body, "template": {"name": TEMPLATE}}
        if "expires_at" in wire:
            wire["expires_at"] = wire["expires_at"].isoformat()
        first = call("POST", f"{self.api()}/v1/intents", json=wire, headers=self._auth())
        if first is None or first.status_code != 201:
            self._count(f"http_create_{first.status_code if first else 'unreachable'}")
            return None
        intent_id = str(first.json()["id"])
        self._remember([(kind, intent_id)])
        if rng.random() < RIVAL_SHARE:
            self._rival_copy(wire)
        if replay:
            again = call("POST", f"{self.api()}/v1/intents", json=wire, headers=self._auth())
            if again is not None and again.status_code in (200, 201):
                self._count(f"http_replay_{again.status_code}")
                if again.status_code != 200 or str(again.json()["id"]) != intent_id:
                    with self._lock:
                        self.mismatches.append(
                            f"{body['idempotency_key']}: replay answered "
                            f"{again.status_code} {again.json().get('id')} for {intent_id}"
                        )
        return intent_id

    def job(self, size: int, rng: random.Random) -> None:
        """A bulk job over both channels; its intents are made by the workers.
        A third carry a short deadline and a third a token that expires."""
        with self._lock:
            self._n += 1
            n = self._n
        audience = [
            {"ref": f"reader-{n}-{i}", "phone": f"+1415557{2000 + i % 7000:04d}"}
            for i in range(size)
        ]
        for i, member in enumerate(audience):
            if i % 3:
                member["email"] = f"reader{n}.{i}@example.org"
        request: dict[str, Any] = {
            "idempotency_key": f"rel:{self.tag}:job:{n}",
            "event_class": "booking_digest",
            "purpose": "transactional",
            "template": TEMPLATE,
            "channels": ["email", "sms"],
            # "all": an intent per channel with a destination; "preferred": the
            # first channel only, and a terminal exclusion when it has none.
            "channel_mode": rng.choice(["all", "preferred"]),
            "variables": {"name": "reader", "booking": f"J{n}"},
            "audience": audience,
        }
        shape = rng.randrange(3)
        if shape == 1:
            request["expires_at"] = utcnow() + timedelta(seconds=rng.uniform(10, 40))
        elif shape == 2:
            request["token_ttl_seconds"] = 60
        job = retrying(lambda: self.t.create_job(**request))
        with self._lock:
            self.jobs.append(str(job["id"]))
            self.created["job"] += 1
            self.created["job_recipients"] += size

    def _rival_copy(self, wire: dict[str, Any]) -> None:
        """The same request, the same key, from the rival tenant."""
        auth = {"Authorization": f"Bearer {self.rival_key}"}
        answer = call("POST", f"{self.api()}/v1/intents", json=wire, headers=auth)
        self._count(f"rival_create_{answer.status_code if answer is not None else 'unreachable'}")
        if answer is not None and answer.status_code == 201:
            with self._lock:
                self.created["rival"] += 1

    # --- cancelling ------------------------------------------------------

    def cancel_one(self, rng: random.Random) -> None:
        """Cancel a random recent intent, half the time one made in the last
        second (most likely being claimed right now)."""
        now = time.monotonic()
        with self._lock:
            if not self.recent:
                return
            fresh = [i for at, i in self.recent[-50:] if now - at < 1.0]
            pool = fresh if fresh and rng.random() < 0.5 else [i for _, i in self.recent[-400:]]
            intent_id = rng.choice(pool)
        answer = call(
            "POST",
            f"{self.api()}/v1/intents/{intent_id}/cancel",
            json={"reason": "member_left"},
            headers=self._auth(),
        )
        self._count(f"cancel_{answer.status_code if answer is not None else 'unreachable'}")

    # --- bookkeeping -----------------------------------------------------

    def _remember(self, made: list[tuple[str, str]]) -> None:
        now = time.monotonic()
        with self._lock:
            for kind, intent_id in made:
                self.created[kind] += 1
                self.recent.append((now, intent_id))
                self.acknowledged.add(intent_id)
            del self.recent[:-2000]

    def _count(self, what: str) -> None:
        with self._lock:
            self.outcomes[what] += 1

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}
