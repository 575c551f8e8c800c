"""The filters every view shares, kept in the URL so that a view can be shared.

Dates are whole UTC days, `start` and `end` inclusive. The URL holds
`?from=2026-11-01&to=2026-11-29&app=a,b&team=...&model=...&provider=...`; values missing
from it take the defaults (the last 30 days, everything).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

DEFAULT_DAYS = 30
DIMENSION_PARAMS = {"app": "apps", "team": "teams", "model": "models", "provider": "providers"}


@dataclasses.dataclass(frozen=True)
class Filters:
    start: dt.date
    end: dt.date
    apps: tuple[str, ...] = ()
    teams: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()

    @property
    def start_at(self) -> dt.datetime:
        return dt.datetime.combine(self.start, dt.time(), dt.UTC)

    @property
    def end_at(self) -> dt.datetime:
        """Exclusive: midnight UTC after the last day."""
        return dt.datetime.combine(self.end + dt.timedelta(days=1), dt.time(), dt.UTC)

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def previous(self) -> Filters:
        """The period of the same length just before this one."""
        return dataclasses.replace(
            self,
            start=self.start - dt.timedelta(days=self.days),
            end=self.start - dt.timedelta(days=1),
        )

    @property
    def grain(self) -> str:
        """Hourly buckets for short ranges, daily otherwise."""
        return "hour" if self.days <= 2 else "day"

    def label(self) -> str:
        return f"{self.start:%Y-%m-%d} → {self.end:%Y-%m-%d} (UTC)"


def default_filters(today: dt.date) -> Filters:
    return Filters(start=today - dt.timedelta(days=DEFAULT_DAYS - 1), end=today)


def _date(value: Any) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        return None


def _names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    parts = value if isinstance(value, list) else str(value).split(",")
    return tuple(sorted({p.strip() for p in parts if p and p.strip()}))


def from_query_params(params: Mapping[str, Any], today: dt.date) -> Filters:
    """Filters from URL parameters; anything missing or malformed takes its default."""
    default = default_filters(today)
    start = _date(params.get("from")) or default.start
    end = _date(params.get("to")) or default.end
    if end < start:
        start, end = end, start
    dims = {field: _names(params.get(param)) for param, field in DIMENSION_PARAMS.items()}
    return Filters(start=start, end=end, **dims)


def to_query_params(filters: Filters) -> dict[str, str]:
    out = {"from": filters.start.isoformat(), "to": filters.end.isoformat()}
    for param, field in DIMENSION_PARAMS.items():
        values = getattr(filters, field)
        if values:
            out[param] = ",".join(values)
    return out
