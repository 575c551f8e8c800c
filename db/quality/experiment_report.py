"""An experiment's results, as `costgate experiments show` and the Experiments page show
them: the figures per variant, each measure's difference against the control with its
95% interval (Welch's), and what the alias would cost a month on each variant's mix (the
what-if engine over the alias's last 30 days)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from gateway.experiments.spec import Experiment
from gateway.experiments.stats import Sample, compare

# measure -> (label, decimal places shown)
MEASURE_LABELS = {
    "cost_usd": ("cost/request USD", 8),
    "latency_ms": ("latency ms (mean)", 1),
    "ttft_ms": ("TTFT ms (mean)", 1),
    "error_rate": ("errors", 4),
    "fallback_rate": ("fallbacks", 4),
    "truncated_rate": ("truncated", 4),
    "content_filter_rate": ("content filter", 4),
    "refusal_rate": ("refusals", 4),
    "json_invalid_rate": ("JSON invalid", 4),
    "tool_args_invalid_rate": ("tool args invalid", 4),
    "feedback": ("feedback score", 4),
}


def _projected(url: str | None, alias: str, weights: dict[str, Decimal]) -> Decimal | None:
    """The alias's last 30 whole days (UTC, today included) re-priced as if all of it had
    gone by `weights`: its ledger cost plus what the what-if engine says changes."""
    from db.analytics.finance_ledger import whatif_rows
    from db.engine import engine_scope
    from db.quality.experiment_results import alias_cost
    from gateway.finance.whatif import Scenario, UnpricedModel

    end = dt.datetime.now(dt.UTC).date()
    start = end - dt.timedelta(days=29)
    try:
        rows = whatif_rows(url, start, end, Scenario(routing={alias: weights}))
        with engine_scope(url) as engine:
            ledger = alias_cost(engine, alias, start, end + dt.timedelta(days=1))
    except (UnpricedModel, ValueError, LookupError):
        return None
    if ledger is None:
        return None
    return ledger + sum((r.difference_usd for r in rows), Decimal(0))


def build_results(url: str | None, name: str, exp: Experiment) -> dict[str, Any]:
    from db.engine import engine_scope
    from db.quality.experiment_results import experiment_figures

    with engine_scope(url) as engine:
        figures = experiment_figures(engine, name)
    order = list(exp.variants)  # the control first, as defined
    figures.sort(key=lambda f: (order.index(f.variant) if f.variant in order else len(order),
                                f.variant))  # fmt: skip
    samples = {f.variant: {m: Sample(*v) for m, v in f.measures.items()} for f in figures}
    diffs = compare(samples, exp.control)
    variants = []
    for f in figures:
        per_request = None if f.cost_usd is None or not f.requests else f.cost_usd / f.requests
        measures = {}
        for m, (n, mean, _) in f.measures.items():
            d = diffs.get(f.variant, {}).get(m)
            measures[m] = {"n": n, "mean": mean,
                           **({} if d is None else {"diff": d.diff, "low": d.low, "high": d.high,
                                                    "excludes_zero": d.excludes_zero})}  # fmt: skip
        weights = exp.variants.get(f.variant, {})
        variants.append({
            "variant": f.variant, "control": f.variant == exp.control, "requests": f.requests,
            "cost_usd": f.cost_usd, "cost_per_request_usd": per_request,
            "cost_per_1000_usd": None if per_request is None else per_request * 1000,
            "latency_p50_ms": f.latency_p50_ms, "latency_p95_ms": f.latency_p95_ms,
            "projected_monthly_usd": _projected(url, exp.alias, dict(weights)) if weights else None,
            "measures": measures,
        })  # fmt: skip
    return {"experiment": name, "alias": exp.alias, "control": exp.control,
            "stick": exp.stick, "interval": "95% Welch t (unequal variances)",
            "variants": variants}  # fmt: skip
