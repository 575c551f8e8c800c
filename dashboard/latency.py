"""Latency and TTFT percentiles, read from histograms of the ledger, in pure pandas.

Percentiles do not add up across days the way the cube's sums do, so the ledger is
rolled up into histograms of successful requests' latency and TTFT instead: bin =
floor(ln(1 + ms) × BINS_PER_LN), 2.02% wide (e^(1/50) - 1), and a percentile is
interpolated inside its bin (as Prometheus' histogram_quantile does): it lies in the same
bin as the exact percentile, so within 2.02% of (1 + the exact value) in ms,
and closed days' histograms can be stored and summed like the cube (`dashboard.rollup`).
The SQL that builds them (`dashboard.queries`) reads `BINS_PER_LN` from here, so both
sides bin alike.
"""

from __future__ import annotations

import math
from typing import Any, SupportsInt, cast

import pandas as pd

from dashboard.cube import period_start

BINS_PER_LN = 50
# a percentile's largest error, relative to (1 + the exact value in ms): one bin's width
RELATIVE_ERROR = 0.0203
HISTOGRAM_COLUMNS = (
    "bucket", "app", "team", "model", "provider", "endpoint", "metric", "bin", "requests"
)
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


def bin_bounds_ms(b: int) -> tuple[float, float]:
    return math.expm1(b / BINS_PER_LN), math.expm1((b + 1) / BINS_PER_LN)


def percentile_from_bins(
    bins: pd.Series[int], counts: pd.Series[int], q: float
) -> float | None:
    per_bin = counts.groupby(bins).sum().sort_index()
    total = int(per_bin.sum())
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for b, n in per_bin.items():
        if seen + n >= rank:
            # a label of the groupby: one of the bins' int64 values (pandas says Hashable)
            lo, hi = bin_bounds_ms(int(cast(SupportsInt, b)))
            return lo + (hi - lo) * ((rank - seen) / n if n else 0.0)
        seen += int(n)
    return bin_bounds_ms(int(per_bin.index[-1]))[1]


def empty_histogram() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=_hist_dtype(c)) for c in HISTOGRAM_COLUMNS})


def _hist_dtype(column: str) -> str:
    if column == "bucket":
        return "datetime64[ns, UTC]"
    return "int64" if column in ("bin", "requests") else "object"


def normalize_histogram(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return empty_histogram()
    out = frame.loc[:, list(HISTOGRAM_COLUMNS)].copy()
    out["bucket"] = pd.to_datetime(out["bucket"], utc=True)
    out["bin"] = out["bin"].astype("int64")
    out["requests"] = out["requests"].astype("int64")
    return out.reset_index(drop=True)


def _bin_counts(hist: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Histograms summed over every other dimension: a few thousand rows at most."""
    return hist.groupby([*keys, "metric", "bin"], dropna=False)["requests"].sum().reset_index()


def latency_table(hist: pd.DataFrame) -> pd.DataFrame:
    """The seeds' latency table: per model, requests and p50/p95/p99 latency and TTFT (ms)."""
    rows = []
    for model, g in _bin_counts(hist, ["model"]).groupby("model", dropna=False, sort=True):
        lat = g[g["metric"] == "latency"]
        ttft = g[g["metric"] == "ttft"]
        row: dict[str, Any] = {
            "model": model if isinstance(model, str) else "(none)",
            "requests": int(lat["requests"].sum()),
        }
        for name, q in QUANTILES.items():
            row[f"latency_{name}_ms"] = percentile_from_bins(lat["bin"], lat["requests"], q)
        row["streams"] = int(ttft["requests"].sum())
        for name, q in QUANTILES.items():
            row[f"ttft_{name}_ms"] = percentile_from_bins(ttft["bin"], ttft["requests"], q)
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.sort_values("requests", ascending=False).reset_index(drop=True) if rows else frame


def latency_quantile(hist: pd.DataFrame, q: float, metric: str = "latency") -> float | None:
    part = hist[hist["metric"] == metric]
    return percentile_from_bins(part["bin"], part["requests"], q)


def latency_series(hist: pd.DataFrame, freq: str) -> pd.DataFrame:
    """p50/p95 latency and p95 TTFT per period."""
    if hist.empty:
        return pd.DataFrame(columns=["period", "latency_p50_ms", "latency_p95_ms", "ttft_p95_ms"])
    frame = _bin_counts(hist.assign(period=period_start(hist["bucket"], freq)), ["period"])
    rows = []
    for period, g in frame.groupby("period", sort=True):
        rows.append(
            {
                "period": period,
                "latency_p50_ms": latency_quantile(g, 0.5),
                "latency_p95_ms": latency_quantile(g, 0.95),
                "ttft_p95_ms": latency_quantile(g, 0.95, "ttft"),
            }
        )
    return pd.DataFrame(rows)
