"""Month-end spend forecast from the current burn rate (pure).

Burn rate = mean daily spend over the last `window_days` complete UTC days (fewer when
the ledger is younger than that); the rest of the month, today's remainder included,
is assumed to burn at that rate. When there is no complete day yet, today's spend so
far is extrapolated over the hours elapsed.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
from collections.abc import Mapping
from decimal import Decimal

SECONDS_PER_DAY = Decimal(86_400)


@dataclasses.dataclass(frozen=True)
class Forecast:
    month_to_date_usd: Decimal
    burn_rate_usd_per_day: Decimal
    days_left: Decimal
    forecast_usd: Decimal
    basis_days: int  # how many complete days the burn rate was averaged over


def month_end(now: dt.datetime) -> dt.datetime:
    last = calendar.monthrange(now.year, now.month)[1]
    return dt.datetime(now.year, now.month, last, tzinfo=dt.UTC) + dt.timedelta(days=1)


def month_end_forecast(
    daily_spend: Mapping[dt.date, Decimal | None],
    now: dt.datetime,
    window_days: int = 7,
) -> Forecast:
    """`daily_spend` maps UTC days to spend (missing days spent nothing)."""
    now = now.astimezone(dt.UTC)
    today = now.date()
    month_start = today.replace(day=1)
    spend = {d: v for d, v in daily_spend.items() if v is not None}
    mtd = sum((v for d, v in spend.items() if month_start <= d <= today), Decimal(0))

    first_day = min(spend, default=today)
    window = [
        today - dt.timedelta(days=i)
        for i in range(1, window_days + 1)
        if today - dt.timedelta(days=i) >= first_day
    ]
    elapsed_today = Decimal((now - dt.datetime.combine(today, dt.time(), dt.UTC)).seconds)
    if window:
        burn = sum((spend.get(d, Decimal(0)) for d in window), Decimal(0)) / len(window)
    elif elapsed_today > 0:
        burn = spend.get(today, Decimal(0)) * SECONDS_PER_DAY / elapsed_today
    else:
        burn = Decimal(0)
    left = Decimal((month_end(now) - now).total_seconds()) / SECONDS_PER_DAY
    return Forecast(
        month_to_date_usd=mtd,
        burn_rate_usd_per_day=burn,
        days_left=left,
        forecast_usd=mtd + burn * left,
        basis_days=len(window),
    )
