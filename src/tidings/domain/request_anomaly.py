"""When a country's or prefix's requests of a user-triggered class jump
against their own baseline: the SMS-pumping signal (issue #41).

The edge counts every request of a bounded SMS class, refused ones too,
in hourly windows per (tenant, class, country, prefix)
(domain/request_limits.py). Here, per such group and per country (its
prefixes summed):

* recent: the requests of the last 60 minutes, estimated from the fixed
  windows as the current window's count plus the previous window's
  weighted by the part of it still inside the last hour (a count that
  does not drop to zero at each hour boundary);
* baseline: the average per hour over the BASELINE_HOURS windows before
  the previous one.

An anomaly holds when recent is at least `floor` (a quiet country does
not alert on three messages) and at least `factor` times the baseline
(a baseline under one request an hour counts as one). Pure: the alert
(observability/alerts/requests.py) reads the rows and says how loud.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

BASELINE_HOURS: Final = 24

AnomalyScope = Literal["country", "prefix"]


@dataclass(frozen=True)
class Volume:
    """One group's counts: this hour's window, the one before, and the sum
    of the BASELINE_HOURS windows before that."""

    tenant_id: str
    event_class: str
    country: str
    prefix: str
    current: int
    previous: int
    baseline_total: int


@dataclass(frozen=True)
class Thresholds:
    floor: int
    factor: float


@dataclass(frozen=True)
class Anomaly:
    tenant_id: str
    event_class: str
    scope: AnomalyScope
    value: str  # the country code or the prefix
    country: str
    recent: int  # requests in the last 60 minutes (estimated)
    baseline_per_hour: float
    prefixes: tuple[str, ...]  # of a country, those with requests this hour, busiest first

    @property
    def ratio(self) -> float:
        return self.recent / max(self.baseline_per_hour, 1.0)


def recent(current: int, previous: int, elapsed: float) -> int:
    """Requests of the last 60 minutes, `elapsed` (0..1) into this hour's window."""
    return round(current + previous * (1.0 - min(max(elapsed, 0.0), 1.0)))


def anomalies(volumes: Iterable[Volume], elapsed: float, limits: Thresholds) -> list[Anomaly]:
    """Every prefix and every country over its thresholds, in a stable order."""
    rows = list(volumes)
    found = [a for a in _assessed(_prefixes(rows), elapsed) if _over(a, limits)]
    found += [a for a in _assessed(_countries(rows), elapsed) if _over(a, limits)]
    return sorted(found, key=lambda a: (a.tenant_id, a.event_class, a.scope, a.value))


def _over(anomaly: Anomaly, limits: Thresholds) -> bool:
    return anomaly.recent >= limits.floor and anomaly.ratio >= limits.factor


_Group = tuple[str, str, AnomalyScope, str, str, list[Volume]]


def _prefixes(rows: list[Volume]) -> Iterator[_Group]:
    for v in rows:
        yield v.tenant_id, v.event_class, "prefix", v.prefix, v.country, [v]


def _countries(rows: list[Volume]) -> Iterator[_Group]:
    groups: dict[tuple[str, str, str], list[Volume]] = {}
    for v in rows:
        groups.setdefault((v.tenant_id, v.event_class, v.country), []).append(v)
    for (tenant, event_class, country), members in groups.items():
        yield tenant, event_class, "country", country, country, members


def _assessed(groups: Iterable[_Group], elapsed: float) -> Iterator[Anomaly]:
    for tenant, event_class, scope, value, country, members in groups:
        busiest = sorted(members, key=lambda v: (-v.current, v.prefix))
        yield Anomaly(
            tenant_id=tenant,
            event_class=event_class,
            scope=scope,
            value=value,
            country=country,
            recent=recent(
                sum(v.current for v in members), sum(v.previous for v in members), elapsed
            ),
            baseline_per_hour=sum(v.baseline_total for v in members) / BASELINE_HOURS,
            prefixes=tuple(v.prefix for v in busiest if v.current)[:10],
        )
