"""An experiment's figures per variant, straight from its ledger rows and their feedback:
for each measure the count, mean and sample variance that Welch's interval needs
(`gateway.experiments.stats`), latency percentiles, and the alias's cost over a period
for the projection. Rows are found by the partial index on (experiment, variant)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

from sqlalchemy import Engine, text

# measure -> SQL expression over usage_records; NULL rows do not count for the measure
MEASURES: dict[str, str] = {
    "cost_usd": "actual_cost_usd",
    "latency_ms": "latency_ms",
    "ttft_ms": "ttft_ms",
    "error_rate": "(status <> 'ok')::int",
    "fallback_rate": "(cardinality(fallback_path) > 1)::int",
    "truncated_rate": "(finish_reason = 'length')::int",
    "content_filter_rate": "(finish_reason = 'content_filter')::int",
    "refusal_rate": "refusal::int",
    "json_invalid_rate": "(NOT json_valid)::int",
    "tool_args_invalid_rate": "(NOT tool_args_valid)::int",
}


@dataclasses.dataclass(frozen=True)
class VariantFigures:
    variant: str
    requests: int
    cost_usd: Decimal | None  # the variant's total, exact
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    # measure -> (count, mean, sample variance); "feedback" among them
    measures: dict[str, tuple[int, float | None, float | None]]


def _measure_sql() -> str:
    return ", ".join(
        f"count({e}) AS {m}_n, avg({e})::float8 AS {m}_mean, var_samp({e})::float8 AS {m}_var"
        for m, e in MEASURES.items()
    )


def experiment_figures(engine: Engine, experiment: str) -> list[VariantFigures]:
    rows_sql = text(
        f"SELECT variant, count(*) AS requests, sum(actual_cost_usd) AS cost_total, "
        f"percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50, "
        f"percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) AS p95, {_measure_sql()} "
        f"FROM usage_records WHERE experiment = :e GROUP BY variant ORDER BY variant"
    )
    feedback_sql = text(
        "SELECT u.variant, count(*), avg(f.score)::float8, var_samp(f.score)::float8 "
        "FROM feedback f JOIN usage_records u ON u.request_id = f.request_id "
        "WHERE u.experiment = :e GROUP BY u.variant"
    )
    with engine.connect() as conn:
        rows = conn.execute(rows_sql, {"e": experiment}).mappings().all()
        rated = conn.execute(feedback_sql, {"e": experiment}).all()
    feedback = {r[0]: (int(r[1]), r[2], r[3]) for r in rated}
    out = []
    for r in rows:
        measures = {m: (int(r[f"{m}_n"]), r[f"{m}_mean"], r[f"{m}_var"]) for m in MEASURES}
        measures["feedback"] = feedback.get(r["variant"], (0, None, None))
        out.append(VariantFigures(r["variant"], int(r["requests"]), r["cost_total"],
                                  r["p50"], r["p95"], measures))  # fmt: skip
    return out


def alias_cost(engine: Engine, alias: str, start: dt.date, end: dt.date) -> Decimal | None:
    """The alias's actual cost (USD) from `start` up to `end` (exclusive), UTC days."""
    lo = dt.datetime(start.year, start.month, start.day, tzinfo=dt.UTC)
    hi = dt.datetime(end.year, end.month, end.day, tzinfo=dt.UTC)
    with engine.connect() as conn:
        value: Decimal | None = conn.execute(text(
            "SELECT sum(actual_cost_usd) FROM usage_records "
            "WHERE alias = :a AND started_at >= :lo AND started_at < :hi"
        ), {"a": alias, "lo": lo, "hi": hi}).scalar_one()  # fmt: skip
    return value


def experiment_variants(engine: Engine) -> dict[str, list[str]]:
    """Every experiment the ledger's rows name, with its variants (by the partial index)."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT experiment, variant FROM usage_records WHERE experiment IS NOT NULL "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        )).all()  # fmt: skip
    out: dict[str, list[str]] = {}
    for name, variant in rows:
        out.setdefault(name, []).append(variant)
    return out
