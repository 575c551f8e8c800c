"""Latency percentiles read from log-spaced histogram bins, without a database."""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd

from dashboard.latency import (
    BINS_PER_LN,
    bin_bounds_ms,
    empty_histogram,
    latency_series,
    latency_table,
    percentile_from_bins,
)
from tests.dashboard.support.records import T0


def histogram(latencies_ms: dict[str | None, list[float]], metric: str = "latency") -> pd.DataFrame:
    """Bin raw latencies the way the SQL does: floor(ln(1 + ms) × BINS_PER_LN)."""
    rows = [
        {
            "bucket": T0,
            "app": "search",
            "team": "platform",
            "model": model,
            "provider": "deepseek",
            "metric": metric,
            "bin": math.floor(math.log1p(ms) * BINS_PER_LN),
            "requests": 1,
        }
        for model, values in latencies_ms.items()
        for ms in values
    ]
    return pd.DataFrame(rows)


def test_a_bin_holds_its_latencies_and_is_about_3_percent_wide():
    for ms in (0.0, 1.0, 499.5, 500.0, 12_345.0):
        lo, hi = bin_bounds_ms(math.floor(math.log1p(ms) * BINS_PER_LN))
        assert lo <= ms < hi
        assert math.isclose((1 + hi) / (1 + lo), math.exp(1 / BINS_PER_LN))


def test_percentiles_are_within_a_bin_of_exact():
    values = [float(ms) for ms in range(1, 2001)]
    hist = histogram({"deepseek-v3.2": values})
    for q in (0.5, 0.95, 0.99):
        exact = values[math.ceil(q * len(values)) - 1]
        got = percentile_from_bins(hist["bin"], hist["requests"], q)
        assert got is not None
        assert abs(got - exact) <= (1 + exact) * (math.exp(1 / BINS_PER_LN) - 1)


def test_no_requests_give_no_percentile():
    empty = empty_histogram()
    assert percentile_from_bins(empty["bin"], empty["requests"], 0.5) is None
    assert latency_table(empty).empty
    assert list(latency_series(empty, "D").columns) == [
        "period",
        "latency_p50_ms",
        "latency_p95_ms",
        "ttft_p95_ms",
    ]


def test_latency_table_is_per_model_busiest_first_with_streams_apart():
    hist = pd.concat(
        [
            histogram({"gpt-4.1": [300.0], None: [100.0, 200.0, 400.0]}),
            histogram({"gpt-4.1": [80.0]}, metric="ttft"),
        ],
        ignore_index=True,
    )
    table = latency_table(hist)
    assert table["model"].tolist() == ["(none)", "gpt-4.1"]
    assert table["requests"].tolist() == [3, 1]
    assert table["streams"].tolist() == [0, 1]
    assert pd.isna(table.loc[0, "ttft_p50_ms"])  # no streams, no TTFT
    series = latency_series(hist.assign(bucket=T0 + dt.timedelta(hours=1)), "D")
    assert len(series) == 1 and series.loc[0, "ttft_p95_ms"] is not None
