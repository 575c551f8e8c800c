"""A budget's burn-down (Plotly): what is left of its limit over the period, and the
forecast at the current pace up to the moment it runs out or the period ends."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

import plotly.graph_objects as go

from dashboard.components.charts import LAYOUT
from gateway.domain.budget_forecast import ExhaustionForecast, SpendPoint, burn_down


def burn_down_figure(
    title: str,
    period: tuple[dt.datetime, dt.datetime],
    points: Sequence[SpendPoint],
    fc: ExhaustionForecast,
    now: dt.datetime,
) -> go.Figure:
    """`points`: cumulative spend this period; `fc`: its forecast at `now`."""
    start, end = period
    limit = fc.limit_usd
    actual = burn_down(limit, points, start)
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
    fig.update_layout(**LAYOUT, title=title, yaxis_title="USD left")
    fig.update_xaxes(range=[start, end])
    return fig
