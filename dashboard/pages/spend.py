"""Spend: by app, team, key, model and provider; daily, weekly, monthly; month-end forecast."""

from __future__ import annotations

import dataclasses
import datetime as dt

import streamlit as st

from dashboard import queries
from dashboard.access.end_users import view_for
from dashboard.components.charts import stacked_by
from dashboard.components.formatting import format_usd
from dashboard.components.page import ledger_is_empty, no_match, refreshing, start_page
from dashboard.components.tables import show_table
from dashboard.cube import rollup
from dashboard.customers import queries as cq
from dashboard.customers import tags
from dashboard.filters import (
    CUBE_FILTERS,
    TAG_ROLLUP_FILTERS,
    USER_ROLLUP_FILTERS,
    ignored_note,
)
from dashboard.forecast import month_end_forecast
from dashboard.spend import breakdown, over_time, totals

ctx = start_page("Spend")
VIEW = view_for(ctx.user.role)
FILTERS = cq.for_role(ctx.filters, VIEW)  # no end-user filter for a role seeing no ids

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
    if note := ignored_note(FILTERS, CUBE_FILTERS, "the forecast"):
        st.info(note)


ATTRIBUTED_GROUPS = {"App": "app", "Team": "team"}


def attributed_section() -> None:
    """Spend over time of what an end-user (else tag) filter selects, from its rollup."""
    honours = USER_ROLLUP_FILTERS if FILTERS.end_users else TAG_ROLLUP_FILTERS
    if note := ignored_note(FILTERS, honours, "spend over time"):
        st.info(note)
    st.caption(
        "With an end-user or tag filter, spend comes from the daily rollups per end user "
        "and per tag, which split by app and team only."
    )
    left, right = st.columns(2)
    group_label = left.radio("Break down by", list(ATTRIBUTED_GROUPS), horizontal=True,
                             key="spend_attr_by")  # fmt: skip
    period_label = right.radio("Period", list(PERIODS), horizontal=True, key="spend_period")
    by = ATTRIBUTED_GROUPS[group_label]
    daily = cq.attributed_series(ctx.url, FILTERS, VIEW, by)
    if daily.empty:
        no_match()
        return
    series = tags.over_time(daily, by, PERIODS[period_label])
    span = (min(series["period"].min(), FILTERS.start_at), FILTERS.end_at)
    st.plotly_chart(
        stacked_by(series, by, "actual_cost_usd", f"{period_label} spend by {by}", "USD",
                   span=span, freq=PERIODS[period_label]),
        width="stretch",
    )  # fmt: skip
    st.subheader(f"Spend by {by}")
    show_table(tags.table(daily, by), *TABLE_FORMAT, key="spend_attr_table")


TABLE_FORMAT = (
    ["spend_usd", "list_spend_usd", "savings_usd"],
    ["savings_pct", "share_pct"],
    {
        "spend_usd": "spend",
        "list_spend_usd": "at list prices",
        "savings_usd": "savings",
        "share_pct": "share of spend %",
        "unknown_cost_requests": "unknown cost (requests)",
    },
)


def tag_section() -> None:
    """Spend by the values of one tag key over time (the tag rollup)."""
    st.subheader("Spend by tag")
    keys = cq.tag_keys(ctx.url, ctx.user.team)
    if not keys:
        st.info("No request of the ledger carries a tag yet.")
        return
    default = keys.index(FILTERS.tag_key) if FILTERS.tag_key in keys else 0
    key = st.selectbox("Tag key", keys, index=default, key="spend_tag_key")
    if note := ignored_note(FILTERS, TAG_ROLLUP_FILTERS, "the tag breakdown"):
        st.info(note)
    daily = cq.tag_series(ctx.url, FILTERS, key)
    if daily.empty:
        st.info(f"No request of this period carries the tag {key}.")
        return
    series = tags.over_time(daily, "tag_value", "D")
    st.plotly_chart(
        stacked_by(series, "tag_value", "actual_cost_usd", f"Daily spend by {key}", "USD",
                   span=(FILTERS.start_at, FILTERS.end_at), freq="D"),
        width="stretch",
    )  # fmt: skip
    labels = {**TABLE_FORMAT[2], "tag_value": key}
    show_table(tags.table(daily, "tag_value"), TABLE_FORMAT[0], TABLE_FORMAT[1], labels,
               key="spend_tag_table")  # fmt: skip
    st.caption(
        "A request with several tags counts under each of its keys: the sums over one key "
        "are exact; different keys' sums overlap."
    )


def body() -> None:
    if ledger_is_empty(ctx):
        return
    forecast_section()
    if FILTERS.attributed:
        attributed_section()
    else:
        cube_section()
    tag_section()


def cube_section() -> None:
    cube = queries.cube(ctx.url, FILTERS)
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
