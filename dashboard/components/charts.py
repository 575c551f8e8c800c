"""Plotly figures the pages share; routing changes appear as markers on time charts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pandas as pd
import plotly.graph_objects as go

LAYOUT = dict(
    margin=dict(l=10, r=10, t=40, b=10),
    height=320,
    legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
    hovermode="x unified",
)


def as_float(values: Sequence[Any]) -> list[float | None]:
    """Decimals to floats for plotting only; unknown stays a gap, never 0."""
    return [None if v is None or (isinstance(v, float) and v != v) else float(v) for v in values]


def time_chart(
    frame: pd.DataFrame,
    series: dict[str, str],
    title: str,
    y_title: str,
    markers: Sequence[tuple[dt.datetime, str]] = (),
    kind: str = "line",
) -> go.Figure:
    """One trace per (column -> label) in `series` over frame['period']."""
    fig = go.Figure()
    for column, label in series.items():
        y = as_float(frame[column].tolist())
        if kind == "bar":
            fig.add_bar(x=frame["period"], y=y, name=label)
        else:
            fig.add_scatter(x=frame["period"], y=y, name=label, mode="lines+markers")
    add_change_markers(fig, markers)
    fig.update_layout(title=title, yaxis_title=y_title, barmode="stack", **LAYOUT)
    return fig


def stacked_by(frame: pd.DataFrame, by: str, value: str, title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    for name, part in frame.groupby(by, dropna=False, sort=True):
        fig.add_bar(x=part["period"], y=as_float(part[value].tolist()), name=str(name))
    fig.update_layout(title=title, yaxis_title=y_title, barmode="stack", **LAYOUT)
    return fig


def add_change_markers(fig: go.Figure, markers: Sequence[tuple[dt.datetime, str]]) -> None:
    """A dashed vertical line per routing change, labelled (shapes, not add_vline, which
    cannot annotate a datetime axis)."""
    for when, label in markers:
        fig.add_shape(
            type="line",
            x0=when,
            x1=when,
            y0=0,
            y1=1,
            yref="paper",
            line=dict(color="#d62728", dash="dash", width=1),
        )
        fig.add_annotation(
            x=when,
            y=1,
            yref="paper",
            text=label,
            showarrow=False,
            font=dict(size=10),
            xanchor="left",
            yanchor="top",
            bgcolor="rgba(255,255,255,0.7)",
        )


def bar_chart(
    labels: Sequence[str], values: Sequence[Decimal | float | None], title: str, x_title: str
) -> go.Figure:
    fig = go.Figure(go.Bar(x=as_float(list(values)), y=list(labels), orientation="h"))
    fig.update_layout(title=title, xaxis_title=x_title, **LAYOUT)
    fig.update_yaxes(autorange="reversed")
    return fig
