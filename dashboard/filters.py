"""The filters every view shares, kept in the URL so that a view can be shared.

Dates are whole UTC days, `start` and `end` inclusive. The URL holds
`?from=2026-11-01&to=2026-11-29&app=a,b&team=...&model=...&provider=...&endpoint=...`;
values missing from it take the defaults (the last 30 days, everything). `clamp` keeps a
range to the ledger's data and at most `MAX_SPAN_DAYS`, whatever the URL asks for.

`team_scope` is not a filter the user picks: it is the signed-in user's team (for a
team-scoped user), set on the server and never read from the URL, and every query
applies it on top of the other filters.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

DEFAULT_DAYS = 30
# the longest range a view covers: a year and a month, so that a year-over-year month fits
MAX_SPAN_DAYS = 400
DIMENSION_PARAMS = {
    "app": "apps",
    "team": "teams",
    "model": "models",
    "provider": "providers",
    "endpoint": "endpoints",
}


@dataclasses.dataclass(frozen=True)
class Filters:
    start: dt.date
    end: dt.date
    apps: tuple[str, ...] = ()
    teams: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ()  # the APIs called: chat.completions, embeddings...
    team_scope: str | None = None

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
    def names(param: str) -> tuple[str, ...]:
        return _names(params.get(param))

    # never a team scope: that comes from the signed-in user, not from the URL
    return Filters(
        start=start,
        end=end,
        apps=names("app"),
        teams=names("team"),
        models=names("model"),
        providers=names("provider"),
        endpoints=names("endpoint"),
    )


def clamp(
    filters: Filters,
    first_day: dt.date | None,
    last_day: dt.date | None,
    today: dt.date,
    max_days: int = MAX_SPAN_DAYS,
) -> tuple[Filters, str | None]:
    """The range cut to what the ledger holds, and a note saying so when it was cut.

    `first_day`/`last_day`: the ledger's first and last request (None: it is empty). The
    end stops at today (or the last request, if a clock ran ahead). The start moves up to
    the first request, but never to less than the default 30 days, so that the default
    view of a young ledger keeps its length; and a range spans at most `max_days`.
    """
    upper = max(today, last_day or today)
    end = min(filters.end, upper)
    start = min(filters.start, end)
    earliest_data = end - dt.timedelta(days=DEFAULT_DAYS - 1)
    if first_day is not None:
        earliest_data = min(first_day, earliest_data)
    earliest_span = end - dt.timedelta(days=max_days - 1)
    start = max(start, earliest_data, earliest_span)
    notes = []
    if end < filters.end:
        notes.append(f"ends {end:%Y-%m-%d} (nothing later is recorded)")
    if start > filters.start:
        if earliest_span >= earliest_data:
            notes.append(f"starts {start:%Y-%m-%d} (a range spans at most {max_days} days)")
        elif first_day is None:
            notes.append(f"starts {start:%Y-%m-%d} (the ledger holds no requests yet)")
        elif start == first_day:
            notes.append(f"starts {start:%Y-%m-%d}, the day of the ledger's first request")
        else:  # kept at the default length
            notes.append(
                f"starts {start:%Y-%m-%d}, {DEFAULT_DAYS} days back (the ledger's first "
                f"request is from {first_day:%Y-%m-%d})"
            )
    clamped = dataclasses.replace(filters, start=start, end=end)
    note = f"The date range {' and '.join(notes)}." if notes else None
    return clamped, note


def to_query_params(filters: Filters) -> dict[str, str]:
    out = {"from": filters.start.isoformat(), "to": filters.end.isoformat()}
    for param, field in DIMENSION_PARAMS.items():
        values = getattr(filters, field)
        if values:
            out[param] = ",".join(values)
    return out
