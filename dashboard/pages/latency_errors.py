"""Latency & errors: p50/p95/p99 latency and TTFT per model, error rates, throughput."""

from __future__ import annotations

import streamlit as st

from dashboard import queries
from dashboard.components.charts import time_chart
from dashboard.components.markers import routing_markers
from dashboard.components.page import ledger_is_empty, no_match, refreshing, start_page
from dashboard.failures import error_rates, errors_by_class
from dashboard.latency import latency_series, latency_table
from dashboard.spend import over_time, totals

ctx = start_page("Latency & errors")


def body() -> None:
    if ledger_is_empty(ctx):
        return
    f = ctx.filters
    cube = queries.cube(ctx.url, f)
    if totals(cube).requests == 0:
        no_match()
        return
    markers = routing_markers(ctx.url, ctx.settings.app_name, f)

    st.subheader("Latency per model (successful requests)")
    st.caption(
        "Milliseconds, end to end through the gateway; TTFT = time to first token (streams). "
        "Percentiles are read from ~3%-wide histogram bins, as Prometheus does."
    )
    hist = queries.histogram(ctx.url, f)
    table = latency_table(hist).round(0)
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(
                c.replace("_ms", "").replace("_", " ") + " (ms)", format="%d"
            )
            for c in table.columns
            if c.endswith("_ms")
        },
    )
    freq = f.freq
    latency = latency_series(hist, freq)
    if len(latency):
        st.plotly_chart(
            time_chart(
                latency,
                {"latency_p50_ms": "p50", "latency_p95_ms": "p95", "ttft_p95_ms": "TTFT p95"},
                "Latency over time",
                "ms",
                markers,
                span=(f.start_at, f.end_at),
            ),
            width="stretch",
        )

    throughput = over_time(cube.assign(errors=0), freq)
    errors = over_time(cube[cube["status"] != "ok"], freq)
    throughput = throughput.merge(
        errors[["period", "requests"]].rename(columns={"requests": "failed"})
        if len(errors)
        else throughput[["period"]].assign(failed=0),
        on="period",
        how="left",
    ).fillna({"failed": 0})
    st.plotly_chart(
        time_chart(
            throughput,
            {"requests": "Requests", "failed": "Failed"},
            f"Throughput (per {f.grain})",
            "requests",
            markers,
            span=(f.start_at, f.end_at),
        ),
        width="stretch",
    )

    left, right = st.columns(2)
    with left:
        st.subheader("Error rate by provider")
        st.dataframe(
            error_rates(cube, "provider"),
            hide_index=True,
            width="stretch",
            column_config={
                "error_rate_pct": st.column_config.NumberColumn("error rate", format="%.2f%%")
            },
        )
    with right:
        st.subheader("Failures by error class and provider")
        st.dataframe(errors_by_class(cube), hide_index=True, width="stretch")


refreshing(body, ctx.settings)
