"""Overview: the period's KPIs against the previous period; spend and savings over time."""

from __future__ import annotations

import streamlit as st

from dashboard import queries
from dashboard.components.charts import time_chart
from dashboard.components.kpis import overview_tiles
from dashboard.components.markers import routing_markers
from dashboard.components.page import ledger_is_empty, refreshing, start_page
from dashboard.cube import between
from dashboard.latency import latency_quantile
from dashboard.spend import over_time, totals

ctx = start_page("Overview")


def body() -> None:
    if ledger_is_empty(ctx):
        return
    f = ctx.filters
    both = queries.cube_with_previous(ctx.url, f)
    now = totals(between(both, f.start_at, f.end_at))
    before = totals(between(both, f.previous.start_at, f.previous.end_at))
    hist = queries.histogram(ctx.url, f, f.previous.start_at, f.end_at, per_model=False)
    first = queries.first_request_at(ctx.url)
    covered = first is not None and first <= f.previous.start_at
    overview_tiles(
        now,
        before if covered else None,
        latency_quantile(between(hist, f.start_at, f.end_at), 0.95),
        latency_quantile(between(hist, f.previous.start_at, f.previous.end_at), 0.95),
    )
    if now.requests == 0:
        st.info("No requests match these filters in this period.")
        return
    freq = f.freq
    series = over_time(between(both, f.start_at, f.end_at), freq)
    markers = routing_markers(ctx.url, ctx.settings.app_name, f)
    left, right = st.columns(2)
    left.plotly_chart(
        time_chart(
            series,
            {"actual_cost_usd": "Spend", "list_cost_usd": "At list prices"},
            "Spend over time",
            "USD",
            markers,
            span=(f.start_at, f.end_at),
            freq=freq,
        ),
        width="stretch",
    )
    right.plotly_chart(
        time_chart(
            series,
            {"saved_usd": "Saved against no costgate"},
            "Saved over time",
            "USD",
            markers,
            "bar",
            span=(f.start_at, f.end_at),
            freq=freq,
        ),
        width="stretch",
    )


refreshing(body, ctx.settings)
