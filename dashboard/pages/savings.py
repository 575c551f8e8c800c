"""Savings: by model and provider, over time, where they came from, the seeds' table."""

from __future__ import annotations

import streamlit as st

from dashboard import queries
from dashboard.components.charts import stacked_by, time_chart
from dashboard.components.formatting import format_pct, format_usd
from dashboard.components.markers import routing_markers
from dashboard.components.page import ledger_is_empty, no_match, refreshing, start_page
from dashboard.components.tables import show_table
from dashboard.spend import breakdown, comparison_table, over_time, totals

ctx = start_page("Savings")

MONEY = ["spend_usd", "list_spend_usd", "savings_usd"]
LABELS = {
    "spend_usd": "spend",
    "list_spend_usd": "at list prices",
    "savings_usd": "savings",
    "savings_pct": "savings %",
    "unknown_cost_requests": "unknown cost (requests)",
    "share_pct": "share of spend %",
}


def body() -> None:
    if ledger_is_empty(ctx):
        return
    f = ctx.filters
    cube = queries.cube(ctx.url, f)
    t = totals(cube)
    if t.requests == 0:
        no_match()
        return
    cols = st.columns(5)
    cols[0].metric(
        "Savings %",
        format_pct(t.savings_pct),
        help="Savings against list prices, as a share of list-price spend.",
    )
    cols[1].metric(
        "Routing savings",
        format_usd(t.routing_savings_usd),
        help="Baseline model at list price − the models actually used, at list price.",
    )
    cols[2].metric(
        "Provider price & FX savings",
        format_usd(t.provider_savings_usd),
        help="List-price cost − what the provider billed (its price table, multiplier, FX).",
    )
    cols[4].metric(
        "Response-cache savings",
        format_usd(t.cache_savings_usd),
        help="List price of the answers served from the gateway's response cache (cost 0).",
    )
    cols[3].metric(
        "Cached-token savings",
        format_usd(t.cached_savings_usd),
        help="Cached prompt tokens × (list input rate − list cached rate), per price version.",
    )
    st.caption(
        "Routing savings compare with the alias's baseline model (the model an app would "
        "have called without the gateway); requests naming a model directly have no baseline."
    )

    freq = "h" if f.grain == "hour" else "D"
    series = over_time(cube, freq)
    st.plotly_chart(
        time_chart(
            series,
            {
                "routing_savings_usd": "Routing",
                "provider_savings_usd": "Provider price & FX",
                "cached_savings_usd": "Cached tokens",
                "cache_savings_usd": "Response cache",
            },
            "Savings over time, by source",
            "USD",
            routing_markers(ctx.url, ctx.settings.app_name, f),
            kind="bar",
            span=(f.start_at, f.end_at),
            freq=freq,
        ),
        width="stretch",
    )
    by_provider = over_time(cube, freq, by="provider")
    by_provider["provider"] = by_provider["provider"].fillna("(none)")
    st.plotly_chart(
        stacked_by(
            by_provider,
            "provider",
            "savings_usd",
            "Provider price & FX savings over time, by provider",
            "USD",
            span=(f.start_at, f.end_at),
            freq=freq,
        ),
        width="stretch",
    )
    left, right = st.columns(2)
    with left:
        st.subheader("By model")
        show_table(breakdown(cube, "model"), MONEY, ["savings_pct", "share_pct"], LABELS)
    with right:
        st.subheader("By provider")
        show_table(breakdown(cube, "provider"), MONEY, ["savings_pct", "share_pct"], LABELS)

    st.subheader("Monthly comparison (the seeds' table)")
    st.caption(
        "Per month and model: tokens, share of the month's tokens, effective price per 1M "
        "tokens, cost, and savings against the baseline model at list price."
    )
    show_table(
        comparison_table(cube),
        ["usd_per_1m_tokens", "cost_usd", "list_cost_usd", "baseline_cost_usd"],
        ["savings_vs_baseline_pct"],
        {
            "mix_pct": "mix %",
            "usd_per_1m_tokens": "$ / 1M tokens",
            "cost_usd": "cost",
            "list_cost_usd": "at list",
            "baseline_cost_usd": "baseline at list",
            "savings_vs_baseline_pct": "savings vs baseline %",
        },
    )


refreshing(body, ctx.settings)
