"""The shadow-rollout report: shadow decisions from the ledger, compared
with the live system's outcomes (domain/shadow_comparison.py says how).

Library `Tidings.shadow_report`, `POST /v1/controls/shadow-mode/report` and
`tidings replay --from-shadow` all come here. The live outcomes are what
the system that really sent reports, one per idempotency key: a JSON
array or JSON lines of `{"idempotency_key": ..., "sent": true|false,
"code"?: ...}`. See docs/replay.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from tidings.domain.errors import InvalidInput
from tidings.domain.shadow_comparison import LiveOutcome, ShadowDecision, action_of, compare
from tidings.store import shadow
from tidings.store.database import Database

PAGE = 2000
_FIRST = UUID(int=0)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_END = datetime(9000, 1, 1, tzinfo=UTC)  # every stored time is before it
_FIELDS = {"idempotency_key", "sent", "code"}


def shadow_report(
    db: Database,
    tenant: str,
    live: Sequence[LiveOutcome] | None,
    since: datetime | None,
    until: datetime | None,
    now: datetime,
) -> dict[str, Any]:
    window = {"since": since or _EPOCH, "until": until or _END}
    if window["since"] >= window["until"]:
        raise InvalidInput("since", "must be before until")
    comparison = compare(_decisions(db, tenant, window), live)
    return {
        "tenant": tenant,
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "as_of": now.isoformat(),
        **comparison.to_dict(),
    }


def _decisions(db: Database, tenant: str, window: dict[str, datetime]) -> Iterator[ShadowDecision]:
    after = _FIRST
    while True:
        with db.transaction() as conn:
            rows = shadow.decisions(
                conn, tenant, window["since"], window["until"], after=after, limit=PAGE
            )
        for r in rows:
            yield ShadowDecision(
                intent_id=str(r["id"]),
                idempotency_key=r["idempotency_key"],
                event_class=r["event_class"],
                channel=r["channel"],
                country=r["country"],
                code=r["code"] or "ALLOWED",
                action=action_of(r["would"] or "", r["would_action"]),
                decided_at=r["at"].isoformat(),
                policy_version=r["policy_version"],
            )
        if len(rows) < PAGE:
            return
        after = rows[-1]["id"]


def live_outcomes(items: Sequence[Any], where: str = "live") -> list[LiveOutcome]:
    """Strictly read the live system's outcomes: every field checked, a key
    given twice refused (two answers for one message cannot both be true)."""
    outcomes: list[LiveOutcome] = []
    seen: set[str] = set()
    for n, item in enumerate(items):
        at = f"{where}[{n}]"
        if not isinstance(item, Mapping):
            raise InvalidInput(at, "expected an object")
        unknown = set(item) - _FIELDS
        if unknown:
            raise InvalidInput(at, f"unknown field {sorted(unknown)[0]!r}")
        key, sent, code = item.get("idempotency_key"), item.get("sent"), item.get("code")
        if not isinstance(key, str) or not key:
            raise InvalidInput(f"{at}.idempotency_key", "expected a non-empty string")
        if not isinstance(sent, bool):
            raise InvalidInput(f"{at}.sent", "expected true or false")
        if code is not None and not isinstance(code, str):
            raise InvalidInput(f"{at}.code", "expected a string")
        if key in seen:
            raise InvalidInput(f"{at}.idempotency_key", f"{key!r} is given twice")
        seen.add(key)
        outcomes.append(LiveOutcome(key, sent, code))
    return outcomes
