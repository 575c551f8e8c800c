"""The filters every view shares, kept in the URL so that a view can be shared.

Dates are whole UTC days, `start` and `end` inclusive. The URL holds
`?from=2026-11-01&to=2026-11-29&app=a,b&team=...&model=...&provider=...&endpoint=...`;
values missing from it take the defaults (the last 30 days, everything). `clamp` keeps a
range to the ledger's data and at most `MAX_SPAN_DAYS`, whatever the URL asks for.

The default period follows the data (`fitted_default`): a ledger younger than
`MINUTE_VIEW_MAX` is shown from its first request to now in minutes (`since`/`until`, a
window finer than whole days), one up to two days old in hours, an older one in days over
its last 30 days (or since its first day, if that is later), so that a new user's first
look shows the data they have, not one point on a 30-day axis.

End-user and tag filters (`?user=u1,u2&tag_key=tier&tag=gold,silver`: end users by id,
values of one tag key) can be honoured only by the views that read the attribution
rollups (docs/ROLLUPS.md: per end user, per tag, per session, by day); `ignored_by`
names the filters a view cannot apply, so that the view says so instead of silently
showing unfiltered figures. Only one tag key at a time: the tag rollup keeps each key
apart, so "tier=gold and region=eu" has no exact figure there.

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
# a ledger younger than this is shown in minutes, from its first request to now
MINUTE_VIEW_MAX = dt.timedelta(hours=6)
# the end of a minute view is now rounded up to this (stable for a while: cacheable)
MINUTE_VIEW_STEP = dt.timedelta(minutes=10)
FREQS = {"minute": "min", "hour": "h", "day": "D"}
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
    # a window finer than days (a young ledger's default view): [since, until)
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    end_users: tuple[str, ...] = ()  # as stored in the ledger
    tag_key: str | None = None
    tag_values: tuple[str, ...] = ()  # values of tag_key; empty: the tag filter is off

    @property
    def tag_filter(self) -> bool:
        return self.tag_key is not None and bool(self.tag_values)

    @property
    def attributed(self) -> bool:
        """An end-user or tag filter is set: only the attribution rollups can honour it."""
        return bool(self.end_users) or self.tag_filter

    @property
    def start_at(self) -> dt.datetime:
        if self.since is not None:
            return self.since
        return dt.datetime.combine(self.start, dt.time(), dt.UTC)

    @property
    def end_at(self) -> dt.datetime:
        """Exclusive: midnight UTC after the last day (or the window's end)."""
        if self.until is not None:
            return self.until
        return dt.datetime.combine(self.end + dt.timedelta(days=1), dt.time(), dt.UTC)

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def previous(self) -> Filters:
        """The period of the same length just before this one."""
        if self.since is not None and self.until is not None:
            span = self.until - self.since
            return dataclasses.replace(
                self,
                since=self.since - span,
                until=self.since,
                start=(self.since - span).date(),
                end=self.since.date(),
            )
        return dataclasses.replace(
            self,
            start=self.start - dt.timedelta(days=self.days),
            end=self.start - dt.timedelta(days=1),
        )

    @property
    def grain(self) -> str:
        """Minutes for a window of a few hours, hours for a day or two, days otherwise."""
        if self.since is not None and self.end_at - self.start_at <= MINUTE_VIEW_MAX:
            return "minute"
        return "hour" if self.days <= 2 else "day"

    @property
    def freq(self) -> str:
        """The grain as a pandas frequency, for charts and `dashboard.cube.rollup`."""
        return FREQS[self.grain]

    def label(self) -> str:
        if self.since is not None:
            return f"{self.start_at:%Y-%m-%d %H:%M} → {self.end_at:%Y-%m-%d %H:%M} (UTC)"
        return f"{self.start:%Y-%m-%d} → {self.end:%Y-%m-%d} (UTC)"


def default_filters(today: dt.date) -> Filters:
    return Filters(start=today - dt.timedelta(days=DEFAULT_DAYS - 1), end=today)


def fitted_default(first_at: dt.datetime | None, now: dt.datetime) -> Filters:
    """The default period for a ledger whose first request is at `first_at` (module
    docstring): minutes while it is young, then hours, then days."""
    today = now.date()
    if first_at is None or first_at > now:
        return default_filters(today)
    if now - first_at < MINUTE_VIEW_MAX:
        since = first_at.replace(second=0, microsecond=0)
        step = MINUTE_VIEW_STEP
        until = since + ((now - since) // step + 1) * step
        return Filters(start=since.date(), end=until.date(), since=since, until=until)
    start = max(first_at.date(), today - dt.timedelta(days=DEFAULT_DAYS - 1))
    return Filters(start=start, end=today)


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


def from_query_params(
    params: Mapping[str, Any], today: dt.date, default: Filters | None = None
) -> Filters:
    """Filters from URL parameters; anything missing or malformed takes its default
    (`default`: the data's, see `fitted_default`; the last 30 days without it)."""
    default = default or default_filters(today)
    start_param, end_param = _date(params.get("from")), _date(params.get("to"))
    start = start_param or default.start
    end = end_param or default.end
    if end < start:
        start, end = end, start
    def names(param: str) -> tuple[str, ...]:
        return _names(params.get(param))

    # the data's window only when the URL names no dates at all
    window = start_param is None and end_param is None
    # never a team scope: that comes from the signed-in user, not from the URL
    return Filters(
        start=start,
        end=end,
        since=default.since if window else None,
        until=default.until if window else None,
        apps=names("app"),
        teams=names("team"),
        models=names("model"),
        providers=names("provider"),
        endpoints=names("endpoint"),
        end_users=names("user"),
        tag_key=str(params.get("tag_key") or "").strip() or None,
        tag_values=names("tag"),
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
    if filters.since is not None:  # the data's own window (fitted_default): in bounds
        return filters, None
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
    """The URL of a view; a data-fitted window (`since`) leaves the dates out, so the
    link keeps following the data."""
    out = {}
    if filters.since is None:
        out = {"from": filters.start.isoformat(), "to": filters.end.isoformat()}
    for param, field in DIMENSION_PARAMS.items():
        values = getattr(filters, field)
        if values:
            out[param] = ",".join(values)
    if filters.end_users:
        out["user"] = ",".join(filters.end_users)
    if filters.tag_filter:
        out["tag_key"] = str(filters.tag_key)
        out["tag"] = ",".join(filters.tag_values)
    return out


# what a view may honour (`ignored_by`'s `honours`): the names of Filters' fields
CUBE_FILTERS = frozenset({"apps", "teams", "models", "providers", "endpoints"})
USER_ROLLUP_FILTERS = frozenset({"apps", "teams", "endpoints", "end_users"})
SESSION_ROLLUP_FILTERS = frozenset({"apps", "teams", "end_users"})
TAG_ROLLUP_FILTERS = frozenset({"apps", "teams", "endpoints", "tag"})
_FILTER_LABELS = {
    "models": "model",
    "providers": "provider",
    "endpoints": "endpoint",
    "end_users": "end user",
    "tag": "tag",
    "apps": "app",
    "teams": "team",
}


def ignored_by(filters: Filters, honours: frozenset[str]) -> tuple[str, ...]:
    """The labels of the filters set in `filters` that a view honouring `honours` cannot
    apply (the team scope is always applied: it is not a filter the user picks)."""
    out = []
    for field, label in _FILTER_LABELS.items():
        active = filters.tag_filter if field == "tag" else bool(getattr(filters, field))
        if active and field not in honours:
            out.append(label)
    return tuple(out)


def ignored_note(filters: Filters, honours: frozenset[str], view: str = "this view") -> str | None:
    """A sentence for a view that cannot apply some of the filters set, or None."""
    ignored = ignored_by(filters, honours)
    if not ignored:
        return None
    which = " and ".join(ignored)
    noun = "filters do" if len(ignored) > 1 else "filter does"
    return f"The {which} {noun} not apply to {view}: it shows every {which}."
