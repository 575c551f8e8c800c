"""The one aggregation layer behind every view, in pure pandas.

Every page reads a *cube*: usage records grouped by time bucket and the dimensions a
view can slice by, with additive measures (counts, token sums, exact Decimal money
sums). PostgreSQL builds the cube (`dashboard.queries`, GROUP BY over the ledger), so a
million rows never reach pandas; `records_to_cube` builds the very same cube from raw
records, which is how tests reconcile the SQL with these functions. Because all views
derive from one cube through the functions below, their totals agree.

Money columns hold `Decimal` (or None: unknown cost stays unknown, never 0). Sums skip
None and are None only when every value is None.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import pandas as pd

DIMENSIONS = (
    "bucket",
    "app",
    "team",
    "key_id",
    "alias",
    "model",
    "provider",
    "status",
    "error_class",
)
COUNTS = (
    "requests",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "unknown_cost_requests",
    "estimated_requests",
)
MONEY = (
    "actual_cost_usd",
    "list_cost_usd",
    "baseline_cost_usd",
    "savings_usd",  # list − actual: what the provider's price and FX saved
    "priced_list_usd",  # list cost of the rows whose actual cost is known
    "routing_savings_usd",  # baseline − list: what routing to cheaper models saved
    "cached_savings_usd",  # cached tokens × (list input − list cached input)
)
CUBE_COLUMNS = DIMENSIONS + COUNTS + MONEY
GRAINS = {"hour": "h", "day": "D"}
PER_MILLION = Decimal(1_000_000)
# requests that got an answer: a NULL cost on one of these is a cost we do not know
# (failed requests without usage are reported as errors instead)
ANSWERED = ("ok", "cancelled")


def dsum(values: Iterable[Any]) -> Decimal | None:
    """Exact sum of Decimals skipping None/NaN; None when there is nothing to add."""
    total: Decimal | None = None
    for v in values:
        if v is None or (isinstance(v, float) and v != v):
            continue
        total = Decimal(v) if total is None else total + Decimal(v)
    return total


def empty_cube() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in CUBE_COLUMNS})


def _dtype(column: str) -> str:
    if column == "bucket":
        return "datetime64[ns, UTC]"
    return "int64" if column in COUNTS else "object"


def normalize_cube(frame: pd.DataFrame) -> pd.DataFrame:
    """Give a cube from any source the same dtypes (SQL NULL counts -> 0, UTC buckets)."""
    if frame.empty:
        return empty_cube()
    out = frame.loc[:, list(CUBE_COLUMNS)].copy()
    out["bucket"] = pd.to_datetime(out["bucket"], utc=True)
    for c in COUNTS:
        out[c] = pd.to_numeric(out[c]).fillna(0).astype("int64")
    for c in MONEY:
        out[c] = [None if _is_missing(v) else Decimal(v) for v in out[c]]
    for c in DIMENSIONS[1:]:
        out[c] = [None if _is_missing(v) else str(v) for v in out[c]]
    return out.reset_index(drop=True)


def _is_missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def records_to_cube(
    records: pd.DataFrame,
    grain: str = "day",
    cached_discount: Mapping[Any, Decimal] | None = None,
) -> pd.DataFrame:
    """The cube from raw records (columns named as UsageRecord's fields).

    `cached_discount` maps a price version id to (list input − list cached input) per 1M
    tokens, as the SQL reads it from price_versions.
    """
    if records.empty:
        return empty_cube()
    discount = cached_discount or {}
    r = records.copy()
    r["bucket"] = pd.to_datetime(r["started_at"], utc=True).dt.floor(GRAINS[grain])
    r["key_id"] = [None if _is_missing(k) else str(k) for k in r["key_id"]]
    rows = []
    for dims, g in r.groupby(list(DIMENSIONS), dropna=False, sort=True):
        actual, lst, base = g["actual_cost_usd"], g["list_cost_usd"], g["baseline_cost_usd"]
        known = [not _is_missing(v) for v in actual]
        cached_savings = dsum(
            Decimal(int(t)) * discount[pv] / PER_MILLION
            for t, pv in zip(g["cached_prompt_tokens"], g["price_version_id"], strict=True)
            if not _is_missing(t) and pv in discount
        )
        rows.append(
            dict(zip(DIMENSIONS, dims, strict=True))
            | {
                "requests": len(g),
                "prompt_tokens": int(g["prompt_tokens"].fillna(0).sum()),
                "cached_prompt_tokens": int(g["cached_prompt_tokens"].fillna(0).sum()),
                "completion_tokens": int(g["completion_tokens"].fillna(0).sum()),
                "reasoning_tokens": int(g["reasoning_tokens"].fillna(0).sum()),
                "unknown_cost_requests": sum(
                    1 for k, st in zip(known, g["status"], strict=True) if not k and st in ANSWERED
                ),
                "estimated_requests": int((g["usage_source"] == "estimated").sum()),
                "actual_cost_usd": dsum(actual),
                "list_cost_usd": dsum(lst),
                "baseline_cost_usd": dsum(base),
                "savings_usd": dsum(_diff(lst, actual)),
                "priced_list_usd": dsum(v for v, k in zip(lst, known, strict=True) if k),
                "routing_savings_usd": dsum(_diff(base, lst)),
                "cached_savings_usd": cached_savings,
            }
        )
    return normalize_cube(pd.DataFrame(rows))


def _diff(a: Iterable[Any], b: Iterable[Any]) -> Iterable[Decimal | None]:
    for x, y in zip(a, b, strict=True):
        yield None if _is_missing(x) or _is_missing(y) else Decimal(x) - Decimal(y)


# -- slicing ---------------------------------------------------------------------------


def between(cube: pd.DataFrame, start: dt.datetime, end: dt.datetime) -> pd.DataFrame:
    """Rows whose bucket lies in [start, end)."""
    if cube.empty:
        return cube
    b = cube["bucket"]
    return cube[(b >= pd.Timestamp(start)) & (b < pd.Timestamp(end))]


def rollup(cube: pd.DataFrame, by: list[str], freq: str | None = None) -> pd.DataFrame:
    """Sum the measures by some dimensions and, with `freq` ('h', 'D', 'W', 'MS'), by time."""
    keys = list(by)
    frame = cube
    if freq is not None:
        frame = cube.copy()
        frame["period"] = _period_start(frame["bucket"], freq)
        keys = ["period", *keys]
    if frame.empty:
        return pd.DataFrame(columns=[*keys, *COUNTS, *MONEY])
    grouped = frame.groupby(keys, dropna=False, sort=True)
    out = grouped[list(COUNTS)].sum()
    for c in MONEY:
        out[c] = grouped[c].agg(dsum)
    out = out.reset_index()
    for k in by:  # groupby turns a None key into NaN: keep "no value" as None
        out[k] = out[k].astype(object).where(out[k].notna(), None)
    return out


def _period_start(buckets: pd.Series, freq: str) -> pd.Series:
    naive = buckets.dt.tz_convert("UTC").dt.tz_localize(None)
    if freq == "W":  # ISO weeks start on Monday
        start = naive.dt.normalize() - pd.to_timedelta(naive.dt.day_of_week, unit="D")
    elif freq == "MS":
        start = naive.dt.to_period("M").dt.start_time
    else:
        start = naive.dt.floor(freq)
    return start.dt.tz_localize("UTC")


# -- figures the pages show ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Totals:
    requests: int
    errors: int
    tokens: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    spend_usd: Decimal | None
    list_spend_usd: Decimal | None
    savings_usd: Decimal | None
    savings_pct: Decimal | None
    routing_savings_usd: Decimal | None
    cached_savings_usd: Decimal | None
    baseline_usd: Decimal | None
    unknown_cost_requests: int
    estimated_requests: int

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None


def totals(cube: pd.DataFrame) -> Totals:
    errors = int(cube.loc[cube["status"] != "ok", "requests"].sum()) if len(cube) else 0
    savings = dsum(cube["savings_usd"])
    priced = dsum(cube["priced_list_usd"])
    return Totals(
        requests=int(cube["requests"].sum()),
        errors=errors,
        tokens=int(cube["prompt_tokens"].sum() + cube["completion_tokens"].sum()),
        prompt_tokens=int(cube["prompt_tokens"].sum()),
        cached_prompt_tokens=int(cube["cached_prompt_tokens"].sum()),
        completion_tokens=int(cube["completion_tokens"].sum()),
        spend_usd=dsum(cube["actual_cost_usd"]),
        list_spend_usd=dsum(cube["list_cost_usd"]),
        savings_usd=savings,
        savings_pct=percent(savings, priced),
        routing_savings_usd=dsum(cube["routing_savings_usd"]),
        cached_savings_usd=dsum(cube["cached_savings_usd"]),
        baseline_usd=dsum(cube["baseline_cost_usd"]),
        unknown_cost_requests=int(cube["unknown_cost_requests"].sum()),
        estimated_requests=int(cube["estimated_requests"].sum()),
    )


def percent(part: Decimal | None, whole: Decimal | None) -> Decimal | None:
    if part is None or not whole:
        return None
    return part * 100 / whole


def breakdown(cube: pd.DataFrame, by: str) -> pd.DataFrame:
    """One row per value of `by`: requests, tokens, spend, list spend, savings, share."""
    r = rollup(cube, [by])
    if r.empty:
        return pd.DataFrame(columns=[by, "requests", "tokens", "spend_usd", "share_pct"])
    total = dsum(r["actual_cost_usd"])
    out = pd.DataFrame(
        {
            by: r[by].fillna("(none)"),
            "requests": r["requests"],
            "tokens": r["prompt_tokens"] + r["completion_tokens"],
            "spend_usd": r["actual_cost_usd"],
            "list_spend_usd": r["list_cost_usd"],
            "savings_usd": r["savings_usd"],
            "savings_pct": [
                percent(s, p) for s, p in zip(r["savings_usd"], r["priced_list_usd"], strict=True)
            ],
            "unknown_cost_requests": r["unknown_cost_requests"],
            "share_pct": [percent(s, total) for s in r["actual_cost_usd"]],
        }
    )
    return out.sort_values("spend_usd", key=_money_sort_key, ascending=False).reset_index(drop=True)


def _money_sort_key(s: pd.Series) -> pd.Series:
    return s.map(lambda v: float("-inf") if v is None else float(v))


def over_time(cube: pd.DataFrame, freq: str, by: str | None = None) -> pd.DataFrame:
    """Spend, list spend, savings, requests and tokens per period (optionally per `by`)."""
    r = rollup(cube, [by] if by else [], freq=freq)
    if r.empty:
        return r
    r["tokens"] = r["prompt_tokens"] + r["completion_tokens"]
    return r


def savings_components(cube: pd.DataFrame) -> pd.DataFrame:
    """Where the savings came from, each against what the same tokens would have cost."""
    t = totals(cube)
    return pd.DataFrame(
        {
            "component": [
                "Routing to cheaper models (baseline list − list)",
                "Provider price and FX (list − actual)",
                "Cached prompt tokens (input rate − cached rate, at list)",
            ],
            "savings_usd": [t.routing_savings_usd, t.savings_usd, t.cached_savings_usd],
        }
    )


def comparison_table(cube: pd.DataFrame) -> pd.DataFrame:
    """The seeds' comparison, per month and model: tokens, mix, price, cost and savings.

    "Without the gateway" is the baseline model's list price for the same tokens.
    """
    r = rollup(cube, ["model"], freq="MS")
    if r.empty:
        return pd.DataFrame()
    r = r[r["requests"] > 0].copy()
    r["tokens"] = r["prompt_tokens"] + r["completion_tokens"]
    month_tokens = r.groupby("period")["tokens"].transform("sum")
    out = pd.DataFrame(
        {
            "month": r["period"].dt.strftime("%Y-%m"),
            "model": r["model"].fillna("(none)"),
            "tokens": r["tokens"],
            "mix_pct": (r["tokens"] * 100 / month_tokens.where(month_tokens > 0)).round(1),
            "usd_per_1m_tokens": [
                None if c is None or not t else c * PER_MILLION / t
                for c, t in zip(r["actual_cost_usd"], r["tokens"], strict=True)
            ],
            "cost_usd": r["actual_cost_usd"],
            "list_cost_usd": r["list_cost_usd"],
            "baseline_cost_usd": r["baseline_cost_usd"],
            "savings_vs_baseline_pct": [
                percent(None if b is None or c is None else b - c, b)
                for b, c in zip(r["baseline_cost_usd"], r["actual_cost_usd"], strict=True)
            ],
        }
    )
    return out.sort_values(["month", "tokens"], ascending=[True, False]).reset_index(drop=True)


def error_rates(cube: pd.DataFrame, by: str) -> pd.DataFrame:
    """Requests, errors and error rate (%) per value of `by`."""
    if cube.empty:
        return pd.DataFrame(columns=[by, "requests", "errors", "error_rate_pct"])
    frame = cube.assign(errors=cube["requests"].where(cube["status"] != "ok", 0))
    g = frame.groupby(by, dropna=False)[["requests", "errors"]].sum().reset_index()
    g[by] = g[by].fillna("(none)")
    g["error_rate_pct"] = (g["errors"] * 100 / g["requests"]).round(2)
    return g.sort_values("errors", ascending=False).reset_index(drop=True)


def errors_by_class(cube: pd.DataFrame) -> pd.DataFrame:
    """Failed requests per (error class, provider)."""
    failed = cube[cube["status"] != "ok"] if len(cube) else cube
    if failed.empty:
        return pd.DataFrame(columns=["error_class", "provider", "requests"])
    g = failed.groupby(["error_class", "provider"], dropna=False)["requests"].sum()
    out = g.reset_index().fillna({"error_class": "(unclassified)", "provider": "(none)"})
    return out.sort_values("requests", ascending=False).reset_index(drop=True)


def export_frame(cube: pd.DataFrame) -> pd.DataFrame:
    """Day × app × model × provider with tokens, spend, list-price spend and savings."""
    r = rollup(cube, ["app", "model", "provider"], freq="D")
    columns = [
        "day",
        "app",
        "model",
        "provider",
        "requests",
        "prompt_tokens",
        "cached_prompt_tokens",
        "completion_tokens",
        "spend_usd",
        "list_spend_usd",
        "savings_usd",
        "unknown_cost_requests",
    ]
    if r.empty:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(
        {
            "day": r["period"].dt.strftime("%Y-%m-%d"),
            "app": r["app"],
            "model": r["model"],
            "provider": r["provider"],
            "requests": r["requests"],
            "prompt_tokens": r["prompt_tokens"],
            "cached_prompt_tokens": r["cached_prompt_tokens"],
            "completion_tokens": r["completion_tokens"],
            "spend_usd": r["actual_cost_usd"],
            "list_spend_usd": r["list_cost_usd"],
            "savings_usd": r["savings_usd"],
            "unknown_cost_requests": r["unknown_cost_requests"],
        }
    )[columns]


def select(
    frame: pd.DataFrame,
    apps: tuple[str, ...] = (),
    teams: tuple[str, ...] = (),
    models: tuple[str, ...] = (),
    providers: tuple[str, ...] = (),
) -> pd.DataFrame:
    """Rows of a cube or histogram matching the dimension filters (empty filter: all)."""
    mask = pd.Series(True, index=frame.index)
    for column, values in (
        ("app", apps),
        ("team", teams),
        ("model", models),
        ("provider", providers),
    ):
        if values:
            mask &= frame[column].isin(values)
    return frame[mask]


# -- latency percentiles from histograms -------------------------------------------------
#
# Percentiles do not add up across days, so the ledger is rolled up into histograms of
# successful requests' latency and TTFT: bin = floor(ln(1 + ms) × BINS_PER_LN), about 3%
# wide, and a percentile is interpolated inside its bin (as Prometheus'
# histogram_quantile does). The error stays within a bin's width.

BINS_PER_LN = 32
HISTOGRAM_COLUMNS = ("bucket", "app", "team", "model", "provider", "metric", "bin", "requests")


def bin_bounds_ms(b: int) -> tuple[float, float]:
    return math.expm1(b / BINS_PER_LN), math.expm1((b + 1) / BINS_PER_LN)


def percentile_from_bins(bins: pd.Series, counts: pd.Series, q: float) -> float | None:
    per_bin = counts.groupby(bins).sum().sort_index()
    total = int(per_bin.sum())
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for b, n in per_bin.items():
        if seen + n >= rank:
            lo, hi = bin_bounds_ms(int(b))
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


QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


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
    frame = _bin_counts(hist.assign(period=_period_start(hist["bucket"], freq)), ["period"])
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
