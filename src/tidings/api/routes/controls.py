"""Operator controls: the kill switch and shadow mode, per channel, country,
notification purpose and event class."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tidings.api.auth import Admin, Caller, Reader
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.schemas.admin import ControlIn, ControlList, ControlOut, ControlScope
from tidings.api.schemas.shadow import (
    RolloutReport,
    RolloutReportIn,
    ShadowReport,
    ShadowReportIn,
)

router = APIRouter(prefix="/v1/controls", tags=["controls"])


@router.put("/kill-switch", responses=responses(*WITH_BODY), summary="Stop sends in a scope")
def kill_switch(body: ControlIn, caller: Admin) -> ControlOut:
    return _set(caller, "kill_switch", body)


@router.put(
    "/shadow-mode",
    # 409 COHORT_SHRINK: a live_percent below the scope's; the kill switch stops sends.
    responses=responses(*WITH_BODY, 409),
    summary="Decide but never send, in a scope",
)
def shadow_mode(body: ControlIn, caller: Admin) -> ControlOut:
    return _set(caller, "shadow_mode", body)


@router.post(
    "/shadow-mode/report",
    responses=responses(*WITH_BODY),
    summary="Judge a shadow rollout: shadow decisions against the live system's outcomes",
)
def shadow_mode_report(body: ShadowReportIn, caller: Reader) -> ShadowReport:
    live = None if body.live is None else [o.model_dump() for o in body.live]
    report = caller.tidings.shadow_report(live, since=body.since, until=body.until)
    return ShadowReport(**report)


@router.post(
    "/rollout-report",
    responses=responses(*WITH_BODY),
    summary="Count a rollout step before its live cohort grows (docs/operations.md)",
)
def rollout_report(body: RolloutReportIn, caller: Reader) -> RolloutReport:
    scope = body.scope
    report = caller.tidings.rollout_report(
        since=body.since,
        until=body.until,
        channel=scope.channel,
        country=scope.country,
        purpose=scope.purpose,
        event_class=scope.event_class,
    )
    return RolloutReport(**report)


@router.get("", responses=responses(), summary="Every control ever set, on or off")
def list_controls(caller: Admin) -> ControlList:
    return ControlList(items=[_out(r) for r in _rows(caller)])


def _set(caller: Caller, kind: str, body: ControlIn) -> ControlOut:
    scope = body.scope
    caller.tidings.set_control(
        kind,
        body.enabled,
        channel=scope.channel,
        country=scope.country,
        purpose=scope.purpose,
        event_class=scope.event_class,
        live_percent=body.live_percent,
        actor=caller.actor,
    )
    wanted = (kind, *_key(scope.model_dump()))
    return next(_out(r) for r in _rows(caller) if (r["kind"], *_key(r)) == wanted)


def _key(scope: dict[str, Any]) -> tuple[str, ...]:
    """A scope as stored: '' for all, the country upper-case."""
    return (
        scope["channel"] or "",
        (scope["country"] or "").upper(),
        scope["purpose"] or "",
        scope["event_class"] or "",
    )


def _rows(caller: Caller) -> list[dict[str, Any]]:
    return caller.tidings.controls()


def _out(row: dict[str, Any]) -> ControlOut:
    # Stored '' means "all"; the API says so with null.
    names = ("channel", "country", "purpose", "event_class")
    scope: dict[str, Any] = {name: row[name] or None for name in names}
    return ControlOut(
        kind=row["kind"],
        enabled=row["enabled"],
        scope=ControlScope(**scope),
        live_percent=row["live_percent"],
        updated_at=row["updated_at"],
        updated_by=row["updated_by"],
    )
