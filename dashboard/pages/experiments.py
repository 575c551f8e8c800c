"""Experiments: A/B tests of routing mixes (docs/EXPERIMENTS.md), per variant cost,
latency, quality signals and feedback, each against the control with its 95% interval
(Welch's), the intervals drawn. The same figures as `costgate experiments show`."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard.components.page import ledger_is_empty, start_page
from db.quality.experiment_report import MEASURE_LABELS, build_results
from gateway.experiments.spec import Experiment

ctx = start_page("Experiments", with_period=False)
DRAWN = ("cost_usd", "feedback", "latency_ms", "error_rate", "truncated_rate")


def experiments() -> tuple[dict[str, Experiment], str | None]:
    """The live settings' experiments; unreachable, the ledger's (control: first by name)."""
    try:
        from gateway.control.routing_update import read_routing

        live = read_routing(ctx.settings.ray_dashboard_url, ctx.settings.app_name)
        return dict(live.experiments), None
    except Exception as err:  # noqa: BLE001 - any failure: say so, read the ledger's names
        from db.engine import engine_scope
        from db.quality.experiment_results import experiment_variants

        with engine_scope(ctx.url) as engine:
            found = experiment_variants(engine)
        now = dt.datetime.now(dt.UTC)
        return {name: Experiment(alias="?", variants={v: {"?": Decimal(1)} for v in vs},
                                 split={v: 1 for v in vs}, started_at=now)
                for name, vs in found.items() if len(vs) > 1}, f"{type(err).__name__}"  # fmt: skip


def interval_chart(results: dict[str, Any], measure: str) -> go.Figure:
    rows = [(v["variant"], v["measures"][measure]) for v in results["variants"]
            if "diff" in v["measures"].get(measure, {})]  # fmt: skip
    fig = go.Figure(go.Scatter(
        x=[m["diff"] for _, m in rows], y=[name for name, _ in rows], mode="markers",
        error_x={"type": "data", "symmetric": False,
                 "array": [m["high"] - m["diff"] for _, m in rows],
                 "arrayminus": [m["diff"] - m["low"] for _, m in rows]},
    ))  # fmt: skip
    fig.add_vline(x=0, line_dash="dot")
    fig.update_layout(title=f"{MEASURE_LABELS[measure][0]}: difference against the control",
                      height=160 + 40 * len(rows), margin={"t": 40, "b": 20})  # fmt: skip
    return fig


if ctx.user.team is not None:
    st.info("Experiments span every team's traffic: not shown to a team-scoped user.")
    st.stop()
if ledger_is_empty(ctx):
    st.stop()
found, unreachable = experiments()
if unreachable:
    st.warning(f"Cannot read the live experiments ({unreachable}): showing those the ledger "
               "names, the first variant by name as the control.")  # fmt: skip
if not found:
    st.info("No experiments yet. Start one with `costgate experiments start` "
            "(docs/EXPERIMENTS.md); the demo starts one.")  # fmt: skip
    st.stop()
name = st.selectbox("Experiment", list(found), key="experiment_name")
exp = found[name]
results = build_results(ctx.url, name, exp)
state = "running" if exp.running(dt.datetime.now(dt.UTC)) else (
    f"promoted {exp.promoted}" if exp.promoted else "stopped")  # fmt: skip
st.caption(f"Alias `{exp.alias}` · sticky by {exp.stick} · control `{exp.control}` · {state} "
           f"· intervals: {results['interval']}")  # fmt: skip
table = pd.DataFrame([{
    "variant": v["variant"], "requests": v["requests"],
    "USD / request": v["cost_per_request_usd"], "USD / 1k": v["cost_per_1000_usd"],
    "p50 ms": v["latency_p50_ms"], "p95 ms": v["latency_p95_ms"],
    "feedback": v["measures"]["feedback"]["mean"], "ratings": v["measures"]["feedback"]["n"],
    "month if all (USD)": v["projected_monthly_usd"],
} for v in results["variants"]])  # fmt: skip
st.dataframe(table, hide_index=True, width="stretch")
for measure in DRAWN:
    if any("diff" in v["measures"].get(measure, {}) for v in results["variants"]):
        st.plotly_chart(interval_chart(results, measure), width="stretch")
with st.expander("Every measure, with its interval"):
    st.dataframe(pd.DataFrame([
        {"variant": v["variant"], "measure": MEASURE_LABELS[m][0], "n": s["n"], "mean": s["mean"],
         "difference": s.get("diff"), "low": s.get("low"), "high": s.get("high")}
        for v in results["variants"] for m, s in v["measures"].items()
    ]), hide_index=True, width="stretch")  # fmt: skip
