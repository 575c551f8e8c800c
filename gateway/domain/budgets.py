"""Budgets: a spending limit in USD on an app, a team, a key or the whole gateway, per
UTC calendar day, week (from Monday) or month. Pure: the store is `db.budgets`, the
enforcement `gateway.quota`.

The amount counted against a budget is what the provider bills, in USD (the ledger's
`actual_cost_usd`). A hard budget refuses requests whose worst-case cost no longer fits;
a soft one only alerts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from decimal import Decimal

DEFAULT_ALERT_AT: tuple[int, ...] = (50, 80, 100)


def split_tag(scope_value: str) -> tuple[str, str]:
    """A tag budget's "key=value" as (key, value)."""
    key, _, value = scope_value.partition("=")
    return key.strip(), value.strip()


class BudgetScope(enum.StrEnum):
    APP = "app"
    TEAM = "team"
    KEY = "key"
    ALL = "all"  # the whole gateway; its scope_value is ""
    # every end user of an app (its scope_value) separately: each has the whole limit
    EACH_USER = "each_user"
    TAG = "tag"  # requests carrying one tag; scope_value "key=value"


class BudgetPeriod(enum.StrEnum):
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


@dataclasses.dataclass(frozen=True, slots=True)
class Budget:
    id: int
    scope: BudgetScope
    scope_value: str  # the app or team name, the key id; "" for ALL
    period: BudgetPeriod
    limit_usd: Decimal
    hard: bool
    alert_at: tuple[int, ...] = DEFAULT_ALERT_AT

    def __post_init__(self) -> None:
        check_budget(self.scope, self.scope_value, self.limit_usd, self.alert_at)

    def describe(self) -> str:
        """The words of a refusal: this budget's scope, period and limit, nothing else
        (not what was spent, nor anything about another tenant)."""
        return (
            f"the {_ADJECTIVE[self.period]} budget of ${_usd(self.limit_usd)} "
            f"on {describe_scope(self.scope, self.scope_value)}"
        )

    def window(self, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        return period_window(self.period, now)


_ADJECTIVE = {BudgetPeriod.DAY: "daily", BudgetPeriod.WEEK: "weekly", BudgetPeriod.MONTH: "monthly"}


def describe_scope(scope: BudgetScope, scope_value: str) -> str:
    if scope is BudgetScope.ALL:
        return "the whole gateway"
    if scope is BudgetScope.EACH_USER:
        return f"each end user of app {scope_value!r}"
    if scope is BudgetScope.TAG:
        return f"requests tagged {scope_value!r}"
    return f"{scope.value} {scope_value!r}"


def _usd(amount: Decimal) -> str:
    # exact, without trailing zeros beyond cents: 0.02 -> "0.02", 5 -> "5.00"
    text = format(amount.normalize(), "f")
    whole, _, frac = text.partition(".")
    return f"{whole}.{(frac + '00')[: max(2, len(frac))]}"


def check_budget(
    scope: BudgetScope, scope_value: str, limit_usd: Decimal, alert_at: tuple[int, ...]
) -> None:
    """Raise ValueError for a budget that cannot be stored."""
    if scope is BudgetScope.ALL and scope_value != "":
        raise ValueError("a gateway-wide budget has no scope value")
    if scope is not BudgetScope.ALL and not scope_value.strip():
        raise ValueError(f"a {scope.value} budget needs the {scope.value}'s name or id")
    if scope is BudgetScope.TAG:
        key, eq, value = scope_value.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ValueError("a tag budget's scope is key=value, e.g. feature=search")
    if not isinstance(limit_usd, Decimal) or not limit_usd.is_finite() or limit_usd < 0:
        raise ValueError("a budget's limit is a finite, non-negative USD amount")
    if any(not 0 < a <= 1000 for a in alert_at):
        raise ValueError("alert thresholds are percentages between 1 and 1000")


def parse_alert_at(text: str) -> tuple[int, ...]:
    """ "50,80,100" -> (50, 80, 100): sorted, de-duplicated."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"alert thresholds are whole percentages: {text!r}") from None
    if any(not 0 < a <= 1000 for a in values):
        raise ValueError("alert thresholds are percentages between 1 and 1000")
    return tuple(values)


def period_window(period: BudgetPeriod, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of the UTC calendar period holding `now`; weeks start on Monday."""
    if now.tzinfo is None:
        raise ValueError("now needs a time zone")
    utc = now.astimezone(dt.UTC)
    day = dt.datetime(utc.year, utc.month, utc.day, tzinfo=dt.UTC)
    if period is BudgetPeriod.DAY:
        return day, day + dt.timedelta(days=1)
    if period is BudgetPeriod.WEEK:
        start = day - dt.timedelta(days=utc.weekday())
        return start, start + dt.timedelta(days=7)
    start = day.replace(day=1)
    if start.month == 12:
        return start, start.replace(year=start.year + 1, month=1)
    return start, start.replace(month=start.month + 1)
