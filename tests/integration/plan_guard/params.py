"""Representative parameters for every read query the plan guard plans
(tests/integration/test_plan_guard.py), and the queries it leaves out, each
with its reason.

The values name rows of `load.sql`: tenant t1, its 60,000-recipient job
a001 read in the middle, one of its intents by key. A page is 50 rows, so
a page read by index costs a few hundred buffers and a scan of any of the
big tables costs thousands.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

START = datetime(2026, 1, 1, tzinfo=UTC)
JOB = UUID("01900000-0000-7000-8000-00000000a001")
OTHER_JOB = UUID("01900000-0000-7000-8000-00000000a002")


def intent_id(g: int) -> UUID:
    """The id load.sql gives intent number g: a UUIDv7 shape."""
    ms = 1735689600000 + g * 1000
    return UUID(f"{ms:012x}7000" + "8" + f"{g:015x}")


# Intent 30,000: recipient 30,000 of job a001, delivered, one attempt.
G = 30000
NOW = START + timedelta(days=5)
PAGE = 50

DEFAULTS: dict[str, Any] = {
    "tenant_id": "t1",
    "job_id": JOB,
    "job_ids": [JOB, OTHER_JOB],
    "after": 30000,
    "limit": PAGE,
    "urgent_limit": PAGE,
    # The console's count of due intents stops here (store/console_reads.py).
    "cap": 1000,
    "now": NOW,
    "since": NOW - timedelta(hours=1),
    "until": NOW,
    "unknown_since": NOW - timedelta(hours=1),
    "id": intent_id(G),
    "intent_id": intent_id(G),
    "ids": [intent_id(G)],
    "n": 1,
    "idempotency_key": f"k{G}",
    "channel": "sms",
    "channels": ["sms"],
    "provider": "twilio",
    "providers": ["twilio"],
    "provider_message_id": f"SMk{G}",
    "attempt_key": f"{intent_id(G)}.1",
    "account": "twilio",
    "horizon": 60,
    "lease_until": NOW + timedelta(minutes=5),
    "ref": f"r{G}",
    "refs": [f"r{G}"],
    "recipient_ref": None,
    "correlation_id": None,
    "event_class": None,
    "destination_hash": f"ph{G}",
    "hashes": [f"ph{G}"],
    "purposes": None,
    "name": "reset",
    "revision": None,
    "locale": "en",
    "version": "p1",
    "policy_version": "p1",
    "key_id": "key1",
    "key_hashes": ["h1"],
    "session_hash": "s1",
    "tenants": ["t1", "t2"],
    "txid": "0",
    "codes": ["PROVIDER_RATE_LIMITED"],
    "threshold": 3,
    "default_seconds": 3600,
    "froms": ["", "pending"],
    "events": ["create", "step"],
    "tos": ["pending", "delivered"],
    "bounds": [1.0, 2.0, 5.0],
    "low": intent_id(29000),
    "high": intent_id(31000),
    "most": PAGE,
    "clocks": json.dumps([{"tenant_id": "t1", "policy_version": "p1", "days": 30}]),
    "default_days": 30,
    "longest_days": 30,
    "before": NOW,
    "lock": 1,
    "key": 1,
    # The request edge's volume windows (alert_request_volume) and the
    # spend breakers' counters (console_spend_used).
    "current": NOW,
    "previous": NOW - timedelta(hours=1),
    "baseline_from": NOW - timedelta(hours=25),
    "keys": ["country_spend:sms:86400s:DE"],
    "windows": [NOW - timedelta(hours=12)],
}

# Where a query's own parameters mean something else than the default.
OVERRIDES: dict[str, dict[str, Any]] = {
    # A cancel by event class, from the middle of the class's intents: half
    # of t1's intents are of class `offer`, a sixth of them open.
    "cancel_candidates": {
        "event_class": "offer",
        "recipient_ref": None,
        "correlation_id": None,
        "after_at": START + timedelta(seconds=G),
        "after_id": intent_id(G),
    },
    # A cancel by job: the filter the bulk cancel is slow on.
    "cancel_candidates_in_job": {"after_id": intent_id(G)},
    "count_final_matching": {},
    # GET /v1/intents: the first page of a tenant's newest intents.
    "list_intents": {
        "idempotency_key": None,
        "state": None,
        "created_from": None,
        "created_to": None,
        "after_at": None,
        "after_id": None,
        "limit": 51,
    },
    # GET /v1/suppressions: the first page of a tenant's hard bounces.
    "list_suppressions": {
        "reason": "hard_bounce",
        "provider": None,
        "channel": None,
        "since": None,
        "after_at": None,
        "after_id": None,
        "limit": 51,
    },
    "list_suppression_lifts": {
        "reason": None,
        "provider": None,
        "channel": None,
        "since": None,
        "after_at": None,
        "after_id": None,
        "limit": 51,
    },
    "shadow_decisions": {"after": intent_id(G)},
    # A rollout step's hour of one tenant's sms, every country and purpose.
    "rollout_counts": {"country": None, "purpose": None},
    # One control by its whole key: the tenant's shadow mode on every sms.
    "control_live_percent": {
        "kind": "shadow_mode",
        "country": "",
        "purpose": "",
        "event_class": "",
    },
    "events_after": {"id": 0},
    "next_report_revision": {"id": "rep1"},
    "report_by_id": {"id": "rep1", "revision": 1},
    "scenario_intents": {"job_id": OTHER_JOB},
    # The load's last hour (intents are one a second from START): its
    # refusals, not the 2,400 before them.
    "alert_provider_refused": {"since": START + timedelta(seconds=120000 - 3600)},
}

# More parameters of a query, each planned as a case of its own (named
# `query[what]`): the filters its defaults leave NULL, each found through
# another index. The readers of the indexes 0048 merged are all here.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "cancel_candidates[recipient_ref]": (
        "cancel_candidates",
        {"event_class": None, "recipient_ref": f"r{G + 85}", "after_at": None, "after_id": None},
    ),
    "cancel_candidates[correlation_id]": (
        "cancel_candidates",
        {
            "event_class": None,
            "correlation_id": f"c{G // 10 + 9}",
            "after_at": None,
            "after_id": None,
        },
    ),
    "list_intents[recipient_ref]": ("list_intents", {"recipient_ref": f"r{G}"}),
    "list_intents[event_class]": ("list_intents", {"event_class": "offer"}),
    "list_intents[state]": ("list_intents", {"state": "sending"}),
    "list_intents[correlation_id]": ("list_intents", {"correlation_id": f"c{G // 10}"}),
}

# Reads whose cost is what they are for: they cannot be bounded by a page.
UNBOUNDED: dict[str, str] = {
    "metrics_attempts_histogram": "a scrape's histogram over every finished intent",
    "metrics_accept_to_terminal_histogram": "a scrape's histogram over every finished intent",
    "count_final_matching": "counts a bulk cancel's whole selection, once per cancel",
    "evidence_default_oldest": "runs once per install, when its first months are made (0026)",
    "scenario_intents": "the demo's read of its own whole job",
    "lanes_suppression_lists": "a scrape's gauge of every tenant's suppressions and opt-outs",
    "receipt_blocks": "the demo's summary counts its tenant's receipt-written blocks",
}

# Reads of a backlog (intents not final yet, receipts still due): their
# cost follows how much is in flight, never the history, so they must not
# grow when history does, but may read more than a page. The load keeps
# 12% of 120,000 intents in flight, far more than a healthy engine.
BACKLOG: dict[str, int] = {
    "alert_retrying": 3000,
    "console_due": 1500,
    "expired_lease_ids": 3000,
    "expired_leases": 3000,
    "lanes_due": 3000,
    "metrics_due": 3000,
    "metrics_poll_lag": 3000,
}

# Reads that stop at a cap of rows (the `cap` parameter, 1,000 here), so
# their cost is the cap's, never the backlog's nor the history's. The
# unreconciled alert counts distinct recipients among the oldest `cap`
# intents in flight of each event class and channel (issue 38, item 4):
# six groups here, a thousand rows each. Its count and oldest, and the
# console's and the metric's unreconciled reads, cost a page. The due
# alert reads the oldest `cap` + 1 due of each tenant's channel, lane by
# lane (a tenant's single intents, each job's); the pending alert the
# oldest `cap` + 1 overdue of each tenant's pending and resend_due.
CAPPED: dict[str, int] = {
    "alert_unreconciled": 25000,
    "alert_due": 8000,
    "alert_pending_too_long": 8000,
}

# Caught by the guard and not fixed yet, each with what is left: strict
# xfail, so fixing one fails the guard until it leaves this list.
LEFT: dict[str, str] = {}

# Reads whose transactions turn JIT off first, by the prefix of their
# names: the console's pages (console_without_jit; the overview's chart,
# transition_minutes_since, is read in the overview's transaction), the
# scrapes and alert rounds (metrics_statement_timeout) and the claim
# (claim_without_jit).
WITHOUT_JIT: tuple[str, ...] = (
    "console_",
    "transition_minutes_since",
    "metrics_",
    "alert_",
    "lanes_",
    "claim_",
)

# Statements that are not reads of the ledger: nothing to plan.
NOT_PLANNED: dict[str, str] = {
    "alerts_lock": "an advisory lock",
    "evidence_months_lock": "an advisory lock",
    "evidence_months_lock_timeout": "sets a timeout",
    "metrics_statement_timeout": "sets a timeout and turns JIT off",
    "console_without_jit": "turns JIT off",
    "claim_without_jit": "turns JIT off",
    "evidence_month_create": "DDL through a function",
    "evidence_month_drop": "DDL through a function",
    "notify_due_channels": "pg_notify",
    "wake_workers": "pg_notify",
    "listen_for_due_work": "LISTEN",
    "provider_ids_recording": "advisory locks",
    "provider_ids_unseen": "advisory locks",
    "database_time": "reads no table",
    "dump_table_text": "a demo's dump of a table it names",
    "purge_attempt_evidence": "a purge: deletes through a function",
    "purge_attempt_evidence_default": "a purge: deletes through a function",
    # Its rows are those below the oldest transaction running on the whole
    # server (pg_snapshot_xmin), which other databases' sessions hold back
    # on a shared server: what it reads is not the guard's to choose.
    "events_after": "reads only below the server's oldest running transaction",
}


def query_of(case: str) -> str:
    """The named query a case plans: a case of CASES, or the query itself."""
    return CASES[case][0] if case in CASES else case


def params_for(case: str, needed: set[str]) -> dict[str, Any]:
    query = query_of(case)
    extra = CASES[case][1] if case in CASES else {}
    chosen = {**DEFAULTS, **OVERRIDES.get(query, {}), **extra}
    return {k: chosen[k] for k in needed}
