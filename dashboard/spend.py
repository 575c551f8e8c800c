"""The money figures the pages show: totals, breakdowns, savings, the monthly comparison
and the CSV export, all derived from one cube (`dashboard.cube`), in pure pandas.

They live together because they share one rule: money stays an exact `Decimal`, and an
unknown cost stays None (shown as "unknown", never $0), from the cube to the table a
page renders or the file a user downloads. Deriving every figure through
`dashboard.cube.rollup` is what makes the overview, spend, savings and export agree.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pandas as pd

from dashboard.cube import PER_MILLION, dsum, rollup
from gateway.finance.savings import STEPS, LedgerSums, Savings, decompose


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
    cache_savings_usd: Decimal | None  # answers served by the response cache (cost 0)
    baseline_usd: Decimal | None
    unknown_cost_requests: int
    estimated_requests: int
    savings: Savings  # the headline, saved against no costgate, and its steps

    @property
    def provider_savings_usd(self) -> Decimal | None:
        """List − actual of the answers an upstream served: its price table and FX."""
        if self.savings_usd is None or self.cache_savings_usd is None:
            return self.savings_usd
        return self.savings_usd - self.cache_savings_usd

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None


def totals(cube: pd.DataFrame) -> Totals:
    errors = int(cube.loc[cube["status"] != "ok", "requests"].sum()) if len(cube) else 0
    savings = dsum(cube["savings_usd"])  # response-cache hits included (list − 0)
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
        cache_savings_usd=dsum(cube["cache_savings_usd"]),
        baseline_usd=dsum(cube["baseline_cost_usd"]),
        unknown_cost_requests=int(cube["unknown_cost_requests"].sum()),
        estimated_requests=int(cube["estimated_requests"].sum()),
        savings=savings_split(cube),
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
    # savings less the response cache's: what provider prices and FX saved
    r["provider_savings_usd"] = [
        s if s is None or c is None else s - c
        for s, c in zip(r["savings_usd"], r["cache_savings_usd"], strict=True)
    ]
    # the headline per period: routing + cached tokens + (list − billed), as savings_split
    r["saved_usd"] = [
        None if s is None else s + (rt or 0) + (c or 0)
        for s, rt, c in zip(
            r["savings_usd"], r["routing_savings_usd"], r["cached_savings_usd"], strict=True
        )
    ]
    return r


def savings_split(cube: pd.DataFrame) -> Savings:
    """Saved against no costgate, and its four steps (`gateway.finance.savings`): every
    one a sum of the cube's measures, so the pages, the API and the exports agree."""
    return decompose(
        LedgerSums(
            list_usd=dsum(cube["list_cost_usd"]),
            billed_usd=dsum(cube["actual_cost_usd"]),
            routing_usd=dsum(cube["routing_savings_usd"]),
            cached_tokens_usd=dsum(cube["cached_savings_usd"]),
            cache_hits_usd=dsum(cube["cache_savings_usd"]),
            batch_usd=batch_savings(cube),
        )
    )


def batch_savings(cube: pd.DataFrame) -> Decimal | None:
    """list − billed of the batch lines (the `batch` endpoint's rows), for the waterfall's
    batch-discount step; a cube without the endpoint dimension shows none apart."""
    if "endpoint" not in cube.columns or cube.empty:
        return None
    return dsum(cube.loc[cube["endpoint"] == "batch", "savings_usd"])


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


def export_frame(cube: pd.DataFrame) -> pd.DataFrame:
    """Day × app × team × key × model × provider with tokens, spend, list-price spend and
    savings (finance's own tools slice by team and key, not only by app)."""
    r = rollup(cube, ["app", "team", "key_id", "model", "provider"], freq="D")
    columns = [
        "day",
        "app",
        "team",
        "key_id",
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
        # the Savings page's split (gateway.finance.savings, docs/SAVINGS.md), per row
        "no_costgate_usd",
        "saved_usd",
        *(f"saved_{step}_usd" for step in STEPS),
    ]
    if r.empty:
        return pd.DataFrame(columns=columns)
    splits = [
        decompose(LedgerSums(lst, billed, routing, cached, hits))
        for lst, billed, routing, cached, hits in zip(
            r["list_cost_usd"],
            r["actual_cost_usd"],
            r["routing_savings_usd"],
            r["cached_savings_usd"],
            r["cache_savings_usd"],
            strict=True,
        )
    ]
    # a row with no priced request has no split (unknown, never $0)
    known = [None if v is None else s for v, s in zip(r["actual_cost_usd"], splits, strict=True)]
    split_columns = {
        "no_costgate_usd": [None if s is None else s.no_costgate_usd for s in known],
        "saved_usd": [None if s is None else s.saved_usd for s in known],
    } | {
        f"saved_{step}_usd": [None if s is None else s.steps[step] for s in known]
        for step in STEPS
    }
    return pd.DataFrame(
        {
            "day": r["period"].dt.strftime("%Y-%m-%d"),
            "app": r["app"],
            "team": r["team"],
            "key_id": r["key_id"],
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
            **split_columns,
        }
    )[columns]
