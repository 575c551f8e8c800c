"""Spend by a tag's values (or by app or team, for an end-user or tag filter) over time,
from the attribution rollups' daily rows (pure: frames in, frames out; money exact)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pandas as pd

from dashboard.cube import dsum, period_start
from dashboard.spend import percent

MEASURES = ("requests", "tokens", "unknown_cost_requests")
MONEY = ("actual_cost_usd", "list_cost_usd", "savings_usd")


def over_time(daily: pd.DataFrame, by: str, freq: str) -> pd.DataFrame:
    """The daily rows (bucket, `by`, measures) summed per period ('D', 'W', 'MS') and `by`."""
    columns = ["period", by, *MEASURES, *MONEY]
    if daily.empty:
        return pd.DataFrame(columns=columns)
    frame = daily.assign(period=period_start(pd.to_datetime(daily["bucket"], utc=True), freq))
    frame[by] = frame[by].fillna("(none)")
    rows = []
    for (period, value), part in frame.groupby(["period", by], sort=True):
        row: dict[str, object] = {"period": period, by: value}
        row |= {m: int(part[m].sum()) for m in MEASURES}
        row |= {m: dsum(part[m]) for m in MONEY}
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def table(daily: pd.DataFrame, by: str) -> pd.DataFrame:
    """One row per value of `by` over the whole range: requests, tokens, spend, list
    spend, savings and share of the range's spend, the largest spend first."""
    columns = [by, "requests", "tokens", "spend_usd", "list_spend_usd", "savings_usd",
               "share_pct", "unknown_cost_requests"]  # fmt: skip
    if daily.empty:
        return pd.DataFrame(columns=columns)
    frame = daily.assign(**{by: daily[by].fillna("(none)")})
    rows: list[dict[str, Any]] = []
    for value, part in frame.groupby(by, sort=True):
        rows.append(
            {
                by: value,
                "requests": int(part["requests"].sum()),
                "tokens": int(part["tokens"].sum()),
                "spend_usd": dsum(part["actual_cost_usd"]),
                "list_spend_usd": dsum(part["list_cost_usd"]),
                "savings_usd": dsum(part["savings_usd"]),
                "unknown_cost_requests": int(part["unknown_cost_requests"].sum()),
            }
        )
    total = dsum(r["spend_usd"] for r in rows)
    for r in rows:
        r["share_pct"] = percent(r["spend_usd"], total)
    rows.sort(key=lambda r: Decimal("-Infinity") if r["spend_usd"] is None else r["spend_usd"],
              reverse=True)  # fmt: skip
    return pd.DataFrame(rows, columns=columns)
