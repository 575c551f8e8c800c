"""When a budget runs out, at the pace it is being spent (pure).

The pace is the budget's own average since its period began: spent so far / time
elapsed. A budget period is short (a day, a week, a month) and starts from zero, so that
average is what finance reads on a burn-down chart; a recent-hour rate would swing with
every burst. The forecast is linear: the remaining amount at that pace. A budget already
spent shows the moment it crossed its limit instead (from the cumulative points).

`burn_down` gives the chart: what was left of the limit after each point, from the
period's start (the full limit) to now.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

ZERO = Decimal(0)
_HOUR = Decimal(3600)


@dataclasses.dataclass(frozen=True, slots=True)
class SpendPoint:
    at: dt.datetime
    cumulative_usd: Decimal  # spent from the period's start up to `at`


@dataclasses.dataclass(frozen=True, slots=True)
class ExhaustionForecast:
    spent_usd: Decimal
    limit_usd: Decimal
    rate_usd_per_hour: Decimal  # the average pace since the period began
    projected_end_usd: Decimal  # spent at the period's end, at that pace
    exhausted_at: dt.datetime | None  # past (already spent) or forecast; None: not this period
    already_exhausted: bool

    @property
    def remaining_usd(self) -> Decimal:
        return max(ZERO, self.limit_usd - self.spent_usd)


def _seconds(delta: dt.timedelta) -> Decimal:
    return Decimal(delta.days * 86_400 + delta.seconds) + Decimal(delta.microseconds) / 10**6


def forecast_exhaustion(
    limit_usd: Decimal,
    points: Sequence[SpendPoint],
    start: dt.datetime,
    end: dt.datetime,
    now: dt.datetime,
) -> ExhaustionForecast:
    """The forecast at `now` for a period [start, end) whose spend so far is `points`
    (cumulative, in time order; the last one is what was spent by now)."""
    if not start < end:
        raise ValueError("a period ends after it starts")
    now = min(max(now, start), end)
    spent = points[-1].cumulative_usd if points else ZERO
    elapsed = _seconds(now - start)
    rate = spent / elapsed if elapsed > 0 else ZERO  # USD per second
    projected = spent + rate * _seconds(end - now)
    crossed = next((p.at for p in points if limit_usd > 0 and p.cumulative_usd >= limit_usd), None)
    if limit_usd <= 0 and spent > 0:
        crossed = points[0].at
    exhausted_at: dt.datetime | None = crossed
    if crossed is None and rate > 0:
        seconds_left = (limit_usd - spent) / rate
        if seconds_left < _seconds(end - now):
            exhausted_at = now + dt.timedelta(seconds=float(seconds_left))
    return ExhaustionForecast(
        spent_usd=spent,
        limit_usd=limit_usd,
        rate_usd_per_hour=rate * _HOUR,
        projected_end_usd=projected,
        exhausted_at=exhausted_at,
        already_exhausted=crossed is not None,
    )


def burn_down(
    limit_usd: Decimal, points: Sequence[SpendPoint], start: dt.datetime
) -> list[tuple[dt.datetime, Decimal]]:
    """(time, what was left of the limit) from the period's start, one per point; the
    remainder may go below zero (a soft budget, or a hard one's last request)."""
    out = [(start, limit_usd)]
    out.extend((p.at, limit_usd - p.cumulative_usd) for p in points if p.at > start)
    return out
