"""Savings: by model and provider, over time, where they came from, the seeds' table."""

from __future__ import annotations

import streamlit as st

from dashboard import queries
from dashboard.components.charts import stacked_by, time_chart, waterfall
from dashboard.components.formatting import format_pct, format_usd, money_quantum
from dashboard.components.markers import routing_markers
from dashboard.components.page import ledger_is_empty, no_match, refreshing, start_page
from dashboard.components.tables import show_table
from dashboard.spend import breakdown, comparison_table, over_time, totals
from gateway.finance.savings import STEP_LABELS, STEPS

ctx = start_page("Savings")

MONEY = ["spend_usd", "list_spend_usd", "savings_usd"]
LABELS = {
    "spend_usd": "spend",
    "list_spend_usd": "at list prices",
    "savings_usd": "list − billed",
    "savings_pct": "list − billed %",
    "unknown_cost_requests": "unknown cost (requests)",
    "share_pct": "share of spend %",
}


def body() -> None:
    if ledger_is_empty(ctx):
        return
    f = ctx.filters
    cube = queries.cube(ctx.url, f, dims=queries.SAVINGS_DIMS)
    t = totals(cube)
    if t.requests == 0:
        no_match()
        return
    split = t.savings
    shown = split.rounded(money_quantum(split.no_costgate_usd))
    cols = st.columns(3)
    cols[0].metric(
        "Saved against no costgate",
        format_usd(shown.saved_usd),
        help="No-costgate cost − what the providers billed (docs/SAVINGS.md).",
    )
    cols[1].metric(
        "Saved %",
        format_pct(split.saved_pct),
        help="Saved against no costgate, as a share of the no-costgate cost.",
    )
    cols[2].metric(
        "No-costgate cost",
        format_usd(shown.no_costgate_usd),
        help="The alias's baseline model (or the model named) at list price, every prompt "
        "token at the full input rate.",
    )
    st.plotly_chart(
        waterfall(
            ("Without costgate", shown.no_costgate_usd),
            [(STEP_LABELS[name], shown.steps[name]) for name in STEPS],
            ("Billed", shown.billed_usd),
            "From the no-costgate cost to what the providers billed",
        ),
        width="stretch",
    )
    st.caption(
        "Routing: the baseline model at list − the model that served, at list. Cached "
        "tokens: cached prompt tokens × (list input − list cached rate). Provider price & "
        "FX: list − billed of the answers an upstream served live. Batch discount: list − "
        "billed of the batch lines (the provider's batch rate). Cache hits: the list cost of "
        "the answers the response cache served. The steps add up to the headline."
    )

    freq = f.freq
    series = over_time(cube, freq)
    st.plotly_chart(
        time_chart(
            series,
            {
                "routing_savings_usd": STEP_LABELS["routing"],
                "cached_savings_usd": STEP_LABELS["cached_tokens"],
                "provider_savings_usd": STEP_LABELS["provider_price_fx"],
                "cache_savings_usd": STEP_LABELS["cache_hits"],
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
