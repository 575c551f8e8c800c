"""Spend: by app, team, key, model and provider; daily, weekly, monthly; month-end forecast."""

from __future__ import annotations

import dataclasses
import datetime as dt

import streamlit as st

from dashboard import queries
from dashboard.components.charts import stacked_by
from dashboard.components.formatting import format_usd
from dashboard.components.page import ledger_is_empty, no_match, refreshing, start_page
from dashboard.components.tables import show_table
from dashboard.cube import rollup
from dashboard.forecast import month_end_forecast
from dashboard.spend import breakdown, over_time, totals

ctx = start_page("Spend")

GROUPS = {
    "App": "app",
    "Team": "team",
    "Key": "key_id",
    "Model": "model",
    "Provider": "provider",
    "Endpoint": "endpoint",
}
PERIODS = {"Daily": "D", "Weekly": "W", "Monthly": "MS"}


def forecast_section() -> None:
    now = dt.datetime.now(dt.UTC)
    today = now.date()
    start = min(today.replace(day=1), today - dt.timedelta(days=7))
    window = dataclasses.replace(ctx.filters, start=start, end=today)
    daily = rollup(queries.cube(ctx.url, window), [], freq="D")
    spend = (
        {p.date(): v for p, v in zip(daily["period"], daily["actual_cost_usd"], strict=True)}
        if len(daily)
        else {}
    )
    fc = month_end_forecast(spend, now)
    st.subheader(f"Month-end forecast · {today:%B %Y}")
    cols = st.columns(3)
    cols[0].metric("Month to date", format_usd(fc.month_to_date_usd))
    cols[1].metric(
        "Burn rate",
        f"{format_usd(fc.burn_rate_usd_per_day)} / day",
        help=f"Mean daily spend over the last {fc.basis_days} complete UTC day(s).",
    )
    cols[2].metric("Forecast at month end", format_usd(fc.forecast_usd))
    st.caption(
        "The forecast covers the current calendar month (UTC) whatever the date range; the "
        "app/team/model/provider filters apply."
    )


def body() -> None:
    if ledger_is_empty(ctx):
        return
    forecast_section()
    cube = queries.cube(ctx.url, ctx.filters)
    if totals(cube).requests == 0:
        no_match()
        return
    left, right = st.columns(2)
    group_label = left.radio("Break down by", list(GROUPS), horizontal=True, key="spend_by")
    period_label = right.radio("Period", list(PERIODS), horizontal=True, key="spend_period")
    by = GROUPS[group_label]
    if by == "key_id":
        labels = queries.key_labels(ctx.url)
        cube = cube.assign(key_id=[labels.get(k, k) if k else "(no key)" for k in cube["key_id"]])
    series = over_time(cube, PERIODS[period_label], by=by)
    series[by] = series[by].fillna("(none)")
    st.plotly_chart(
        stacked_by(
            series,
            by,
            "actual_cost_usd",
            f"{period_label} spend by {group_label.lower()}",
            "USD",
            # a week or month may start before the period does
            span=(min(series["period"].min(), ctx.filters.start_at), ctx.filters.end_at),
            freq=PERIODS[period_label],
        ),
        width="stretch",
    )
    st.subheader(f"Spend by {group_label.lower()}")
    show_table(
        breakdown(cube, by),
        ["spend_usd", "list_spend_usd", "savings_usd"],
        ["savings_pct", "share_pct"],
        {
            "key_id": "key",
            "spend_usd": "spend",
            "list_spend_usd": "at list prices",
            "savings_usd": "savings",
            "savings_pct": "savings %",
            "share_pct": "share of spend %",
            "unknown_cost_requests": "unknown cost (requests)",
        },
    )


refreshing(body, ctx.settings)
