"""Plotly figures the pages share; routing changes appear as markers on time charts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pandas as pd
import plotly.graph_objects as go

# The axes' margins are fixed, wide enough for two-line date labels and short tick values
# ("20k", "1.5M": Plotly shortens them): with automargin, Plotly measured every label,
# grew the margins and drew the chart again, and checked each label against the chart's
# edges. The legend may still grow the top margin (a second row of names), which costs a
# redraw only then. Savings' first visit in Chromium, three interleaved runs each: 608,
# 554, 629 ms before, 562, 448, 488 ms after (Chromium's profiler had Plotly's redraws at
# a quarter of the page's main-thread time).
_AXIS = dict(automargin=False, ticklabeloverflow="allow")
_MARGIN = dict(l=70, r=10, t=80, b=40)
LAYOUT = dict(
    margin=_MARGIN,
    height=320,
    legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
    hovermode="x unified",
    xaxis=_AXIS,
    yaxis=dict(rangemode="tozero", **_AXIS),
)


def as_float(values: Sequence[Any]) -> list[float | None]:
    """Decimals to floats for plotting only; unknown stays a gap, never 0."""
    return [None if v is None or (isinstance(v, float) and v != v) else float(v) for v in values]


PERIOD_MS = {
    "min": 60_000,
    "h": 3_600_000,
    "D": 86_400_000,
    "W": 7 * 86_400_000,
    "MS": 30 * 86_400_000,
}

Span = tuple[dt.datetime, dt.datetime]


def _time_axis(fig: go.Figure, span: Span | None) -> None:
    # the whole period on screen, so that one day of data is one bar, not a zoom into it
    if span is not None:
        fig.update_xaxes(range=[span[0], span[1]])


def time_chart(
    frame: pd.DataFrame,
    series: dict[str, str],
    title: str,
    y_title: str,
    markers: Sequence[tuple[dt.datetime, str]] = (),
    kind: str = "line",
    span: Span | None = None,
    freq: str = "D",
) -> go.Figure:
    """One trace per (column -> label) in `series` over frame['period']."""
    fig = go.Figure()
    for column, label in series.items():
        y = as_float(frame[column].tolist())
        if kind == "bar":
            # bars start at their period and are as wide as it
            width = [PERIOD_MS[freq] * 0.9] * len(frame)
            fig.add_bar(x=frame["period"], y=y, name=label, width=width, offset=0)
        else:
            fig.add_scatter(x=frame["period"], y=y, name=label, mode="lines+markers")
    add_change_markers(fig, markers)
    fig.update_layout(title=title, yaxis_title=y_title, barmode="stack", **LAYOUT)
    _time_axis(fig, span)
    return fig


def stacked_by(
    frame: pd.DataFrame,
    by: str,
    value: str,
    title: str,
    y_title: str,
    span: Span | None = None,
    freq: str = "D",
) -> go.Figure:
    fig = go.Figure()
    for name, part in frame.groupby(by, dropna=False, sort=True):
        width = [PERIOD_MS[freq] * 0.9] * len(part)
        fig.add_bar(
            x=part["period"],
            y=as_float(part[value].tolist()),
            name=str(name),
            width=width,
            offset=0,
        )
    fig.update_layout(title=title, yaxis_title=y_title, barmode="stack", **LAYOUT)
    _time_axis(fig, span)
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


def waterfall(
    start: tuple[str, Decimal],
    steps: Sequence[tuple[str, Decimal]],
    end: tuple[str, Decimal],
    title: str,
) -> go.Figure:
    """From a start through the steps taken off it to an end (which they add up to)."""
    labels = [start[0], *(name for name, _ in steps), end[0]]
    values = [float(start[1]), *(-float(v) for _, v in steps), float(end[1])]
    texts = [
        f"${start[1]:,}",
        *(f"−${v:,}" if v >= 0 else f"+${-v:,}" for _, v in steps),
        f"${end[1]:,}",
    ]
    fig = go.Figure(
        go.Waterfall(
            x=labels,
            y=values,
            measure=["absolute", *(["relative"] * len(steps)), "total"],
            text=texts,
            textposition="outside",
            connector=dict(line=dict(color="#888", width=1)),
            decreasing=dict(marker=dict(color="#2ca02c")),  # a saving takes cost off
            increasing=dict(marker=dict(color="#d62728")),  # a step that cost more
            totals=dict(marker=dict(color="#1f77b4")),
        )
    )
    # no legend: the plot starts below the title
    layout = {
        **LAYOUT,
        "hovermode": "closest",
        "height": 380,
        "margin": {**_MARGIN, "t": 60},
    }
    fig.update_layout(title=title, yaxis_title="USD", showlegend=False, **layout)
    return fig
