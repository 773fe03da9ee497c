"""The cohort report: a rollout step's counts, reconciled before the live
cohort grows (docs/operations.md, "Rolling out"). Library
`Tidings.rollout_report`, `POST /v1/controls/rollout-report` and
`tidings rollout report` all come here."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from tidings.client.base import ClientBase
from tidings.domain.errors import InvalidInput
from tidings.domain.rollout import Scope
from tidings.store import controls, rollout

_END = datetime.fromisoformat("9000-01-01T00:00:00+00:00")  # every stored time is before it


class RolloutMethods(ClientBase):
    def rollout_report(
        self,
        *,
        since: datetime,
        until: datetime | None = None,
        channel: str | None = None,
        country: str | None = None,
        purpose: str | None = None,
        event_class: str | None = None,
    ) -> dict[str, Any]:
        """The scope's intents created in [since, until): decided, shadowed,
        sent (accepted by a provider), delivered, failed, unknown, in flight
        and waiting; `settled` once nothing waits or is in flight. The shadow
        control of exactly this scope, if any, gives `shadow_mode` and
        `live_percent`."""
        if until is not None and since >= until:
            raise InvalidInput("since", "must be before until")
        scope = Scope(channel or "", (country or "").upper(), purpose or "", event_class or "")
        with self.db.transaction() as conn:
            counts = dict(rollout.counts(conn, self.tenant, scope, since, until or _END))
            control = controls.shadow_control(conn, self.tenant, scope)
        return {
            "tenant": self.tenant,
            "scope": {k: v or None for k, v in asdict(scope).items()},
            "since": since.isoformat(),
            "until": until.isoformat() if until else None,
            "as_of": self.clock.now().isoformat(),
            "shadow_mode": bool(control and control["enabled"]),
            "live_percent": control["live_percent"] if control else None,
            "counts": {k: int(v) for k, v in counts.items()},
            "settled": counts["waiting"] == 0 and counts["in_flight"] == 0,
        }
