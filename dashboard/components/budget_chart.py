"""A budget's burn-down (Plotly): what is left of its limit over the period, and the
forecast at the current pace up to the moment it runs out or the period ends."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import plotly.graph_objects as go

from dashboard.budget_board import BudgetView
from dashboard.components.charts import LAYOUT
from gateway.domain.budget_forecast import burn_down


def burn_down_figure(view: BudgetView, now: dt.datetime) -> go.Figure:
    f, fc = view.figures, view.forecast
    start, end = f.period_start, f.period_end
    limit = f.budget.limit_usd
    actual = burn_down(limit, view.points, start)
    now = min(max(now, start), end)
    if actual[-1][0] < now:  # flat since the last hour with spend
        actual.append((now, actual[-1][1]))
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[t for t, _ in actual],
            y=[float(r) for _, r in actual],
            mode="lines",
            name="left",
            line=dict(shape="hv"),
        )
    )
    if not fc.already_exhausted and fc.rate_usd_per_hour > 0:
        until = fc.exhausted_at or end
        hours = Decimal((until - now).total_seconds()) / 3600
        left_then = limit - fc.spent_usd - fc.rate_usd_per_hour * hours
        fig.add_trace(
            go.Scatter(
                x=[now, until],
                y=[float(limit - fc.spent_usd), float(left_then)],
                mode="lines",
                name="forecast",
                line=dict(dash="dash"),
            )
        )
    if fc.exhausted_at is not None:
        fig.add_vline(x=fc.exhausted_at, line=dict(color="firebrick", dash="dot"))
    fig.add_hline(y=0, line=dict(color="grey", width=1))
    fig.update_layout(**LAYOUT, title=view.title, yaxis_title="USD left")
    fig.update_xaxes(range=[start, end])
    return fig
