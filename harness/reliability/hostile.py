"""The rival tenant turned hostile (issues #39 and #43).

Once a run it publishes a policy past the limits and, the API having
refused it, plants it around every check. Throughout the run, a round at a
time, it replays every case of tests/security (harness/hostile_cases.py):
each template bomb is published, and must be refused (422); each template
that only fails at render time is published once and sent each round, and
must fail RENDER_LIMIT; rows no check lets in (variables nested past the
JSON decoder's depth, a consent dated in the year 10000) are planted under
a fresh intent, which must be quarantined UNDECODABLE. Its key collisions
with the first tenant are the workload's (`_rival_copy`). `check` reads
where each case ended after the run; whatever went elsewhere is a
violation of `hostile_tenant_isolated`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from psycopg.types.json import Jsonb

from harness.hostile_cases import (
    NESTED_VARIABLES,
    PPRINT,
    PUBLISH_BOMBS,
    UNINTERRUPTIBLE_BOMBS,
    VARIABLE_BOMBS,
    YEAR_10000,
    plant,
)
from tidings import Tidings
from tidings.policies import builtin_document

from .processes import call
from .retry import RETRIES, retrying

RIVAL_TENANT = "rival"
PHONE = "+14155550123"  # one the simulator accepts and delivers
SEND_TIME_BOMBS = {**UNINTERRUPTIBLE_BOMBS, **VARIABLE_BOMBS}
RENDER_LIMIT = ("failed", "RENDER_LIMIT")
QUARANTINED = ("failed", "UNDECODABLE")


@dataclass
class Hostile:
    t: Tidings  # the run's client: the rival's rows are written through it
    api: Callable[[], str]  # the API to call next
    admin_key: str
    tag: str
    count: Callable[[str], None]
    findings: list[str] = field(default_factory=list)
    # Intent id -> the (state, decision code) it must end in.
    expected: dict[str, tuple[str, str]] = field(default_factory=dict)
    policy_intents: list[str] = field(default_factory=list)
    rounds: int = 0
    _published: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- once: a policy past the limits (issue #39) -----------------------

    def policy(self) -> str:
        """The rival publishes a policy whose numbers once stopped shared
        loops for every tenant: the API must refuse it (422). Then it is
        planted around every check, as an old release or a bad restore
        leaves one, and the rival's unsent intents are pointed at it: the
        workers must quarantine those alone, and every invariant must hold."""
        doc = {**builtin_document("default"), "version": f"hostile-{self.tag}"}
        doc["poll_schedule"] = {**doc["poll_schedule"], "give_up_after_seconds": 1e12}
        doc["resend_budget"] = 10**30
        answer = self._post("/v1/policies", doc)
        status = answer.status_code if answer is not None else "unreachable"
        self.count(f"hostile_policy_{status}")
        if status != 422:
            self._find(f"POST /v1/policies with a hostile policy: {status}")
        pointed = retrying(lambda: self._plant_policy(doc))
        with self._lock:
            self.policy_intents += pointed
        return f"API answered {status}; planted, {len(pointed)} unsent intents pointed at it"

    def _plant_policy(self, doc: dict[str, Any]) -> list[str]:
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

    # --- throughout: every case of tests/security (issue #43) --------------

    def round(self) -> str:
        """Every case once: the bombs refused at publish, the send-time
        bombs sent, two unreadable rows planted."""
        with self._lock:
            self.rounds += 1
            n = self.rounds
        refused = self._publish_bombs()
        sent = self._send_bombs(n)
        planted = self._poison_rows(n)
        return (
            f"round {n}: {refused} bombs refused at publish, {sent} sent to fail at render,"
            f" {planted} unreadable rows planted"
        )

    def _publish_bombs(self) -> int:
        """Each refused for what it is (tests/security's codes), not merely
        answered 422."""
        refused = 0
        cases = {
            name: ({"channel": "sms", **spec}, "TEMPLATE_TOO_LARGE")
            for name, spec in PUBLISH_BOMBS.items()
        }
        cases["pprint"] = (
            {"channel": "sms", "body": PPRINT, "required_variables": ["d"]},
            "SYNTAX_ERROR",
        )
        for name, (spec, code) in sorted(cases.items()):
            answer = self._post("/v1/templates", {"name": f"refused_{name}", **spec})
            if answer is None or answer.status_code == 503:
                self.count("hostile_publish_unanswered")  # the database was away throughout
                continue
            codes = _error_codes(answer)
            if answer.status_code == 422 and code in codes:
                refused += 1
            else:
                self._find(
                    f"POST /v1/templates with the {name} bomb: {answer.status_code} {sorted(codes)}"
                )
        return refused

    def _send_bombs(self, n: int) -> int:
        sent = 0
        for name, (body, variables) in sorted(SEND_TIME_BOMBS.items()):
            template = f"bomb_{name}_{self.tag}"
            if template not in self._published:
                published = self._post(
                    "/v1/templates",
                    {
                        "name": template,
                        "channel": "sms",
                        "body": body,
                        "required_variables": sorted(variables),
                    },
                )
                if published is None or published.status_code != 201:
                    status = published.status_code if published is not None else "unreachable"
                    if status not in ("unreachable", 503):
                        self._find(f"POST /v1/templates with the {name} render bomb: {status}")
                    continue
                self._published.add(template)
            wire = {
                "idempotency_key": f"rel:{self.tag}:bomb:{n}:{name}",
                "channel": "sms",
                "recipient": {"ref": f"bomb-{name}", "phone": PHONE},
                "template": {"name": template},
                "variables": variables,
                "purpose": "transactional",
                "event_class": "bomb",
            }
            answer = self._post("/v1/intents", wire)
            if answer is not None and answer.status_code == 201:
                self._expect(str(answer.json()["id"]), RENDER_LIMIT)
                sent += 1
            else:
                self.count("hostile_bomb_unanswered")
        return sent

    def _poison_rows(self, n: int) -> int:
        """Two intents of the rival, each made unreadable in the transaction
        that creates it, so no worker can claim it readable first."""
        rival = self.t.for_tenant(RIVAL_TENANT)

        def notify(conn: Any, what: str) -> str:
            intent = rival.notify(
                idempotency_key=f"rel:{self.tag}:poison:{n}:{what}",
                channel="sms",
                recipient={"ref": f"poison-{what}-{self.tag}-{n}", "phone": PHONE},
                template="rel_notice",
                variables={"name": "P", "booking": f"P{n}"},
                purpose="transactional",
                event_class="poison",
                conn=conn,
            )
            return str(intent.id)

        def nested() -> str:
            with self.t.db.transaction() as conn:
                intent_id = notify(conn, "variables")
                conn.execute(
                    f"UPDATE intents SET variables = {NESTED_VARIABLES}"
                    " WHERE tenant_id = %s AND id = %s",
                    [RIVAL_TENANT, intent_id],
                )
            return intent_id

        def consent() -> str:
            # The consents' date CHECKs are lifted and put back in this
            # transaction (an ACCESS EXCLUSIVE lock): given up after a second
            # of waiting behind the claims that read consents, and tried again.
            with self.t.db.transaction() as conn:
                conn.execute("SET LOCAL lock_timeout = '1s'")
                intent_id = notify(conn, "consent")
                plant(
                    conn,
                    "INSERT INTO consents (tenant_id, ref, channel, purpose, source, captured_at,"
                    " recorded_at) VALUES (%s, %s, 'sms', 'transactional', 'form',"
                    " %s::timestamptz, now())",
                    (RIVAL_TENANT, f"poison-consent-{self.tag}-{n}", YEAR_10000),
                    tables=("consents",),
                )
            return intent_id

        planted = 0
        for make in (nested, consent):
            try:
                self._expect(retrying(make), QUARANTINED)
                planted += 1
            except Exception as exc:  # the database away for the whole retry budget
                self.count(f"hostile_poison_not_planted_{type(exc).__name__}")
        return planted

    # --- after the run ---------------------------------------------------

    def check(self) -> list[str]:
        """Nothing was sent under the planted policy, and each intent pointed
        at it was quarantined; every replayed case ended where it must."""
        found = list(self.findings)
        with self.t.db.transaction() as conn:
            rows = conn.execute(
                "SELECT id::text AS id, state, decision_code FROM intents WHERE id = ANY(%s)",
                [self.policy_intents + list(self.expected)],
            ).fetchall()
        ended = {r["id"]: (r["state"], r["decision_code"]) for r in rows}
        for intent_id in self.policy_intents:
            state, code = ended.get(intent_id, ("missing", None))
            if state in ("pending", "resend_due", "sending", "missing") or (
                state == "failed" and code != "UNDECODABLE"
            ):
                found.append(f"hostile-policy intent {intent_id} ended {state}/{code}")
        pointed = set(self.policy_intents)
        for intent_id, want in self.expected.items():
            if intent_id in pointed:  # a bomb still unsent when the policy was planted
                continue
            got = ended.get(intent_id, ("missing", None))
            if got != want:
                found.append(f"hostile intent {intent_id} ended {got[0]}/{got[1]}, not {want}")
        return found

    # --- helpers ---------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any]) -> httpx.Response | None:
        auth = {"Authorization": f"Bearer {self.admin_key}"}
        answer = None
        for _ in range(RETRIES):  # the API or its database may be away under a fault
            answer = call("POST", f"{self.api()}{path}", json=body, headers=auth)
            if answer is not None and answer.status_code != 503:
                break
            time.sleep(1.0)
        return answer

    def _expect(self, intent_id: str, ended: tuple[str, str]) -> None:
        with self._lock:
            self.expected[intent_id] = ended

    def _find(self, what: str) -> None:
        with self._lock:
            self.findings.append(what)


def _error_codes(answer: httpx.Response) -> set[str]:
    try:
        problem = answer.json()
    except ValueError:  # not a problem document at all
        return set()
    errors = problem.get("errors", []) if isinstance(problem, dict) else []
    return {str(e.get("code")) for e in errors if isinstance(e, dict)}
