"""The automatic quality signals' rates per model and alias over a period, from the ledger
rows (`costgate quality signals`): each rate among the rows where its signal applies."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import Engine, text

_SQL = text("""
SELECT model, alias, count(*) AS requests,
       avg((status <> 'ok')::int)::float8 AS error_rate,
       avg((cardinality(fallback_path) > 1)::int)::float8 AS fallback_rate,
       avg((finish_reason = 'length')::int)::float8 AS truncated_rate,
       avg((finish_reason = 'content_filter')::int)::float8 AS content_filter_rate,
       avg(refusal::int)::float8 AS refusal_rate,
       avg((NOT json_valid)::int)::float8 AS json_invalid_rate, count(json_valid) AS json_n,
       avg((NOT tool_args_valid)::int)::float8 AS tool_args_invalid_rate,
       count(tool_args_valid) AS tool_n
FROM usage_records
WHERE started_at >= :lo AND started_at < :hi AND model IS NOT NULL
GROUP BY model, alias ORDER BY model, alias NULLS FIRST
""")


@dataclasses.dataclass(frozen=True)
class SignalRates:
    model: str
    alias: str | None
    requests: int
    error_rate: float
    fallback_rate: float
    truncated_rate: float | None  # None: no row of the group carries the signal
    content_filter_rate: float | None
    refusal_rate: float | None
    json_invalid_rate: float | None
    json_n: int  # rows in JSON mode or with structured outputs
    tool_args_invalid_rate: float | None
    tool_n: int  # rows with tool calls


def signal_rates(engine: Engine, lo: dt.datetime, hi: dt.datetime) -> list[SignalRates]:
    with engine.connect() as conn:
        rows = conn.execute(_SQL, {"lo": lo, "hi": hi}).mappings().all()
    return [SignalRates(**dict(r)) for r in rows]
