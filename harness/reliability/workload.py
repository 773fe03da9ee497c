"""What a run asks of tidings: intents through the library (floods in one
transaction each) and over HTTP (a steady trickle, with replays of the same
key), bulk jobs, and cancellations racing the workers.

Recipients are drawn from the simulator's magic destinations in fixed
shares, so every run exercises undelivered receipts (resends), permanent
failures, rejections, 429s, 5xx and stalled answers, whatever the global
fault rates are at the moment. Deadlines are drawn so that many fall due
while the run is under way.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from tidings import Tidings
from tidings.policies import builtin_document
from tidings.store.api_keys import create_key

from .processes import call

T = TypeVar("T")
TEMPLATE = "rel_notice"
BODY = "Hello {{ name }}, your booking {{ booking }} is confirmed."
# (kind, share in percent, channel, destination, always a near deadline).
# Stalled answers are kept rare: each holds a worker's send slot for the
# adapter's whole 10 s timeout (see "Findings" in docs/reliability.md).
PROFILES: tuple[tuple[str, float, str, str, bool], ...] = (
    ("sms_ok", 42.0, "sms", "+1415555{n4}", False),
    ("email_ok", 27.0, "email", "member{n}@example.org", False),
    ("sms_undelivered", 7.0, "sms", "+14155550001", False),
    ("email_bounce", 5.0, "email", "bounce+{n}@example.org", False),
    ("sms_failed", 3.0, "sms", "+14155550002", False),
    ("sms_invalid", 3.0, "sms", "+14155550000", False),
    ("sms_stall", 0.7, "sms", "+14155550408", False),
    ("email_stall", 0.3, "email", "timeout+{n}@example.org", False),
    ("sms_5xx", 2.0, "sms", "+14155550500", True),
    ("sms_429", 1.5, "sms", "+14155550429", True),
)
RIVAL_TENANT = "rival"
RIVAL_SHARE = 0.2  # of the HTTP trickle, created again by the rival tenant
# Long enough to outlive a flood's own transaction, short enough to pass mid-run.
NEAR_DEADLINE_S = (15.0, 60.0)
# The harness's own pool meets the same dead connections as everyone after a
# restart; its writes are idempotent by key, so it simply tries again.
RETRIES = 8
# 4,000 distinct non-ASCII characters: punycode's encoder is quadratic in
# them, one call the render budget could not interrupt (issue #39).
PUNYCODE_BOMB = "".join(chr(0x4E00 + i) for i in range(4000))
PUNYCODE_INTENTS = 4


def retrying(action: Callable[[], T]) -> T:
    for attempt in range(RETRIES):
        try:
            return action()
        except psycopg.OperationalError:
            if attempt == RETRIES - 1:
                raise
            time.sleep(0.5 * (attempt + 1))  # the server is coming back; bounded
    raise AssertionError("unreachable")


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Workload:
    t: Tidings
    api_url: str
    rng: random.Random
    tag: str  # makes this run's idempotency keys unique
    api_key: str = ""
    # A second tenant that reuses the first one's idempotency keys over HTTP:
    # each must get its own sends and receipts (invariant 11).
    rival_key: str = ""
    # The rival turned hostile (issue #39): its admin key, the intents it
    # pointed at a planted policy past the limits, and what went wrong.
    rival_admin_key: str = ""
    hostile_intents: list[str] = field(default_factory=list)
    hostile_findings: list[str] = field(default_factory=list)
    bomb_intents: list[str] = field(default_factory=list)
    created: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)
    recent: list[tuple[float, str]] = field(default_factory=list)  # (created, intent id)
    acknowledged: set[str] = field(default_factory=set)  # every create answered or committed
    jobs: list[str] = field(default_factory=list)
    _n: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

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
            _, self.rival_admin_key = create_key(
                conn, RIVAL_TENANT, ("send", "admin"), "rival admin", vault=self.t.vault
            )

    # --- creating --------------------------------------------------------

    def request(self, rng: random.Random | None = None) -> tuple[str, dict[str, Any]]:
        """One intent request, drawn from the profiles; keys are never reused."""
        rng = rng or self.rng
        with self._lock:
            self._n += 1
            n = self._n
        kind, _, channel, pattern, near = rng.choices(PROFILES, [p[1] for p in PROFILES])[0]
        to = pattern.format(n=n, n4=f"{100 + n % 300:04d}")
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
        first = call("POST", f"{self.api_url}/v1/intents", json=wire, headers=self._auth())
        if first is None or first.status_code != 201:
            self._count(f"http_create_{first.status_code if first else 'unreachable'}")
            return None
        intent_id = str(first.json()["id"])
        self._remember([(kind, intent_id)])
        if rng.random() < RIVAL_SHARE:
            self._rival_copy(wire)
        if replay:
            again = call("POST", f"{self.api_url}/v1/intents", json=wire, headers=self._auth())
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
        answer = call("POST", f"{self.api_url}/v1/intents", json=wire, headers=auth)
        self._count(f"rival_create_{answer.status_code if answer is not None else 'unreachable'}")
        if answer is not None and answer.status_code == 201:
            with self._lock:
                self.created["rival"] += 1

    # --- a hostile policy (issue #39) ------------------------------------

    def hostile_policy(self) -> str:
        """The rival publishes a policy whose numbers once stopped shared
        loops for every tenant: the API must refuse it (422). Then it is
        planted around every check, as an old release or a bad restore
        leaves one, and the rival's unsent intents are pointed at it: the
        workers must quarantine those alone, and every invariant must hold."""
        doc = {**builtin_document("default"), "version": f"hostile-{self.tag}"}
        doc["poll_schedule"] = {**doc["poll_schedule"], "give_up_after_seconds": 1e12}
        doc["resend_budget"] = 10**30
        auth = {"Authorization": f"Bearer {self.rival_admin_key}"}
        answer = None
        for _ in range(RETRIES):  # the API or its database may be away under a fault
            answer = call("POST", f"{self.api_url}/v1/policies", json=doc, headers=auth)
            if answer is not None and answer.status_code != 503:
                break
            time.sleep(1.0)
        status = answer.status_code if answer is not None else "unreachable"
        self._count(f"hostile_policy_{status}")
        if status != 422:
            self.hostile_findings.append(f"POST /v1/policies with a hostile policy: {status}")
        pointed = retrying(lambda: self._plant(doc))
        with self._lock:
            self.hostile_intents += pointed
        bombs = self._punycode_bombs()
        return (
            f"API answered {status}; planted, {len(pointed)} unsent intents pointed at it;"
            f" {bombs} punycode renders queued"
        )

    def _punycode_bombs(self) -> int:
        """The rival publishes a template whose one call (`encode`) once held
        a worker past its render budget, and asks for a few intents with it:
        each must fail RENDER_LIMIT and hold up nobody else."""
        auth = {"Authorization": f"Bearer {self.rival_admin_key}"}
        template = {
            "name": f"bomb_{self.tag}",
            "channel": "sms",
            "locale": "en",
            "body": '{{ "' + PUNYCODE_BOMB + '".encode("punycode")|length }}',
            "required_variables": [],
        }
        published = None
        for _ in range(RETRIES):  # the API may be restarting under a fault
            published = call("POST", f"{self.api_url}/v1/templates", json=template, headers=auth)
            if published is not None:
                break
            time.sleep(1.0)
        if published is None or published.status_code != 201:
            status = published.status_code if published is not None else "unreachable"
            self.hostile_findings.append(f"POST /v1/templates with the punycode bomb: {status}")
            return 0
        made = 0
        for n in range(PUNYCODE_INTENTS):
            wire = {
                "idempotency_key": f"rel:{self.tag}:bomb:{n}",
                "channel": "sms",
                "recipient": {"ref": f"bomb-{n}", "phone": "+14155550123"},
                "template": {"name": template["name"]},
                "variables": {},
                "purpose": "transactional",
                "event_class": "bomb",
            }
            answer = call("POST", f"{self.api_url}/v1/intents", json=wire, headers=auth)
            if answer is not None and answer.status_code == 201:
                with self._lock:
                    self.bomb_intents.append(str(answer.json()["id"]))
                made += 1
        self._count(f"punycode_intents_{made}")
        return made

    def _plant(self, doc: dict[str, Any]) -> list[str]:
        # Published long ago, so it is never the rival's current version:
        # only the intents pointed at it use it.
        with self.t.db.transaction() as conn:
            conn.execute(
                "INSERT INTO policies (tenant_id, version, name, document, published_at,"
                " published_by) VALUES (%s, %s, 'hostile', %s, '2000-01-01', 'planted')"
                " ON CONFLICT DO NOTHING",
                [RIVAL_TENANT, doc["version"], Jsonb(doc)],
            )
            rows = conn.execute(
                "UPDATE intents SET policy_version = %s"
                " WHERE tenant_id = %s AND state IN ('pending', 'resend_due') RETURNING id",
                [doc["version"], RIVAL_TENANT],
            ).fetchall()
        return [str(r["id"]) for r in rows]

    def hostile_check(self) -> list[str]:
        """After the run: nothing was sent under the planted policy, and each
        intent pointed at it was quarantined (never left pending)."""
        found = list(self.hostile_findings)
        with self.t.db.transaction() as conn:
            rows = conn.execute(
                "SELECT id, state, decision_code, attempt_count FROM intents WHERE id = ANY(%s)",
                [self.hostile_intents],
            ).fetchall()
            bombs = conn.execute(
                "SELECT id, state, decision_code FROM intents WHERE id = ANY(%s)",
                [self.bomb_intents],
            ).fetchall()
        for r in rows:
            if r["state"] in ("pending", "resend_due", "sending") or (
                r["state"] == "failed" and r["decision_code"] != "UNDECODABLE"
            ):
                found.append(f"hostile intent {r['id']} ended {r['state']}/{r['decision_code']}")
        for r in bombs:
            if (r["state"], r["decision_code"]) != ("failed", "RENDER_LIMIT"):
                found.append(f"punycode intent {r['id']} ended {r['state']}/{r['decision_code']}")
        return found

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
            f"{self.api_url}/v1/intents/{intent_id}/cancel",
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
