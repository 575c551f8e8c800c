"""The Customers page's figures from the statements' results, and the revenue finance
gives (pure: frames and Decimals in, frames and Decimals out).

Money stays exact: the amounts are PostgreSQL's NUMERIC sums, read as Decimal, and a
revenue figure is a Decimal typed or read from a CSV. A month of revenue is 30 days:
the revenue of a range is the monthly price × its days / 30 (`revenue_for_range`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import pandas as pd

MONTH_DAYS = 30


def _money(value: Any) -> Decimal | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value if isinstance(value, Decimal) else Decimal(str(value))


def _pcts(value: Any, n: int) -> list[Decimal | None]:
    if value is None or (isinstance(value, float) and value != value):
        return [None] * n
    return [_money(v) for v in value]


@dataclasses.dataclass(frozen=True)
class UserSummary:
    end_users: int
    spend_usd: Decimal | None
    user_days: int
    priced_user_days: int
    day_p50_usd: Decimal | None
    day_p90_usd: Decimal | None
    day_p99_usd: Decimal | None
    day_max_usd: Decimal | None
    day_mean_usd: Decimal | None


def user_summary(top: pd.DataFrame, days: pd.DataFrame) -> UserSummary:
    """The totals (`sql.users_sql`'s rows) and the distribution of cost per end user per
    day (`sql.user_days_sql`'s one row)."""
    row = days.iloc[0]
    p50, p90, p99 = _pcts(row["day_pcts"], 3)
    return UserSummary(
        end_users=int(top["end_users"].iloc[0]) if len(top) else 0,
        spend_usd=_money(top["total_spend_usd"].iloc[0]) if len(top) else None,
        user_days=int(row["user_days"]),
        priced_user_days=int(row["priced_user_days"]),
        day_p50_usd=p50,
        day_p90_usd=p90,
        day_p99_usd=p99,
        day_max_usd=_money(row["day_max_usd"]),
        day_mean_usd=_money(row["day_mean_usd"]),
    )


def _column(values: list[Decimal | None], like: pd.DataFrame) -> pd.Series:
    return pd.Series(values, index=like.index, dtype=object)


def share(part: Decimal | None, whole: Decimal | None) -> Decimal | None:
    if part is None or not whole:
        return None
    return part * 100 / whole


def top_users(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per end user (the top ones), with each one's share of the range's spend."""
    columns = ["end_user", "requests", "tokens", "spend_usd", "share_pct",
               "unknown_cost_requests"]  # fmt: skip
    if frame.empty:
        return pd.DataFrame(columns=columns)
    total = _money(frame["total_spend_usd"].iloc[0])
    out = frame.assign(
        share_pct=_column([share(_money(s), total) for s in frame["spend_usd"]], frame)
    )
    return out[columns].reset_index(drop=True)


@dataclasses.dataclass(frozen=True)
class SessionSummary:
    sessions: int
    priced_sessions: int
    mean_usd: Decimal | None
    p50_usd: Decimal | None
    p90_usd: Decimal | None
    max_usd: Decimal | None


def session_summary(frame: pd.DataFrame) -> SessionSummary:
    row = frame.iloc[0]
    p50, p90 = _pcts(row["pcts"], 2)
    return SessionSummary(
        sessions=int(row["sessions"]),
        priced_sessions=int(row["priced_sessions"]),
        mean_usd=_money(row["mean_usd"]),
        p50_usd=p50,
        p90_usd=p90,
        max_usd=_money(row["max_usd"]),
    )


def top_sessions(frame: pd.DataFrame) -> pd.DataFrame:
    columns = ["session_id", "end_user", "app", "first_day", "requests", "cost_usd"]
    rows = frame[frame["session_id"].notna()]
    return rows[columns].reset_index(drop=True) if len(rows) else pd.DataFrame(columns=columns)


def growth_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The fastest growers, by absolute increase (the statement's order), with the
    increase as a percentage of the week before (None when that week cost nothing)."""
    out = frame.copy()
    out["increase_pct"] = _column(
        [
            None if not b else (_money(i) or Decimal(0)) * 100 / Decimal(b)
            for b, i in zip(out["before_usd"], out["increase_usd"], strict=True)
        ],
        out,
    )
    return out


def revenue_for_range(monthly_usd: Decimal, days: int) -> Decimal:
    """A monthly price's revenue over `days` (a month counted as 30 days)."""
    return monthly_usd * days / MONTH_DAYS


class RevenueError(ValueError):
    """A revenue file or price that cannot be used; the message says which line and why."""


def parse_plans(text: str) -> dict[str, str]:
    """end user -> plan, from a CSV with the columns end_user and plan (a header line)."""
    reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff")))  # Excel's BOM
    fields = {f.strip().lower() for f in reader.fieldnames or []}
    if not {"end_user", "plan"} <= fields:
        raise RevenueError("the CSV needs a header line with the columns end_user and plan")
    plans: dict[str, str] = {}
    for line, raw in enumerate(reader, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
        user, plan = row.get("end_user", ""), row.get("plan", "")
        if not user or not plan:
            raise RevenueError(f"line {line}: an end_user and a plan are both needed")
        if plans.setdefault(user, plan) != plan:
            raise RevenueError(f"line {line}: {user} is listed with two plans")
    return plans


def parse_price(text: str) -> Decimal:
    try:
        price = Decimal(text.strip().lstrip("$").replace(",", ""))
    except InvalidOperation:
        raise RevenueError(f"{text!r} is not an amount") from None
    if not price.is_finite() or price < 0:
        raise RevenueError(f"{text!r} is not an amount of zero or more")
    return price


def plan_revenue(
    plans: Mapping[str, str], monthly_prices: Mapping[str, Decimal], days: int
) -> tuple[tuple[str, ...], tuple[Decimal, ...], tuple[str, ...]]:
    """(end users, their revenue over `days`, the plans that have no price): the arrays
    `sql.margins_sql` joins; an end user of an unpriced plan is left out (no margin)."""
    users, revenue, unpriced = [], [], set()
    for user, plan in sorted(plans.items()):
        price = monthly_prices.get(plan)
        if price is None:
            unpriced.add(plan)
            continue
        users.append(user)
        revenue.append(revenue_for_range(price, days))
    return tuple(users), tuple(revenue), tuple(sorted(unpriced))


@dataclasses.dataclass(frozen=True)
class MarginSummary:
    end_users: int  # active in the range
    with_revenue: int  # of them, with a revenue figure
    losing: int  # of them, costing more than they pay
    spend_usd: Decimal | None  # of the ones with revenue
    revenue_usd: Decimal | None

    @property
    def margin_usd(self) -> Decimal | None:
        if self.revenue_usd is None:
            return None
        return self.revenue_usd - (self.spend_usd or Decimal(0))


def margin_summary(frame: pd.DataFrame) -> MarginSummary:
    row = frame.iloc[0]
    return MarginSummary(
        end_users=int(row["end_users"]),
        with_revenue=int(row["with_revenue"]),
        losing=int(row["losing"]),
        spend_usd=_money(row["total_spend_usd"]),
        revenue_usd=_money(row["total_revenue_usd"]),
    )


def margin_table(frame: pd.DataFrame, losing_only: bool = False) -> pd.DataFrame:
    """Per end user: spend, revenue, margin and margin % of revenue, lowest margin first."""
    columns = ["end_user", "requests", "spend_usd", "revenue_usd", "margin_usd", "margin_pct"]
    rows = frame[frame["end_user"].notna()]
    if losing_only:
        rows = rows[[_money(m) is not None and m < 0 for m in rows["margin_usd"]]]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    pct = [
        share(_money(m), _money(r))
        for m, r in zip(rows["margin_usd"], rows["revenue_usd"], strict=True)
    ]
    out = rows.assign(margin_pct=_column(pct, rows))
    return out[columns].reset_index(drop=True)
