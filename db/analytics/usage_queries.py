"""The SQL behind the usage and costs API and `costgate report` (docs/USAGE_API.md).

Day and hour buckets are sums over the rollups (`usage_rollup_daily`/`_hourly`, kept by
PostgreSQL as rows arrive: docs/ROLLUPS.md), minute buckets a GROUP BY over raw rows
(one page holds at most 1,440 minutes, so at most a day of them). Either way the
figures are the ledger's: NUMERIC sums, never floats.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Engine, text

from db.analytics.rollup_sql import USAGE_TABLES
from db.analytics.usage_request import UsageQuery

# the endpoints each kind covers (costs: every endpoint)
COMPLETION_ENDPOINTS = ("chat.completions", "completions", "responses", "messages")
ENDPOINTS: dict[str, tuple[str, ...] | None] = {
    "completions": COMPLETION_ENDPOINTS,
    "embeddings": ("embeddings",),
    "costs": None,
}
# group or filter name -> column (the same name in the rollups and the ledger)
COLUMNS = {
    "project_id": "app",
    "api_key_id": "key_id::text",
    "model": "model",
    "team": "team",
    "provider": "provider",
    "alias": "alias",
}
# measure -> (over a rollup, over raw ledger rows)
MEASURES = {
    "requests": ("sum(requests)", "count(*)"),
    "prompt_tokens": ("sum(prompt_tokens)", "coalesce(sum(prompt_tokens), 0)"),
    "cached_prompt_tokens": (
        "sum(cached_prompt_tokens)",
        "coalesce(sum(cached_prompt_tokens), 0)",
    ),
    "completion_tokens": ("sum(completion_tokens)", "coalesce(sum(completion_tokens), 0)"),
    "unknown_cost_requests": (
        "sum(unknown_cost_requests)",
        "count(*) FILTER (WHERE actual_cost_usd IS NULL AND status IN ('ok', 'cancelled'))",
    ),
    "actual_cost_usd": ("sum(actual_cost_usd)", "sum(actual_cost_usd)"),
    "list_cost_usd": ("sum(list_cost_usd)", "sum(list_cost_usd)"),
    "baseline_cost_usd": ("sum(baseline_cost_usd)", "sum(baseline_cost_usd)"),
}


def _groups(query: UsageQuery) -> list[tuple[str, str]]:
    """(output name, SQL expression) of the query's groups; line_item is (model, provider)."""
    names: list[str] = []
    for g in query.group_by:
        for n in ("model", "provider") if g == "line_item" else (g,):
            if n not in names:
                names.append(n)
    return [(n, COLUMNS[n]) for n in names]


def usage_sql(query: UsageQuery) -> tuple[str, dict[str, Any]]:
    """The statement answering one page of `query`, and its parameters."""
    raw = query.width == "1m"
    start = dt.datetime.fromtimestamp(query.page_start, dt.UTC)
    end = dt.datetime.fromtimestamp(query.page_end, dt.UTC)
    params: dict[str, Any] = {"start": start, "end": end}
    if raw:
        source, time_col = "usage_records", "started_at"
        bucket = "date_trunc('minute', started_at, 'UTC')"
    else:
        source, time_col = USAGE_TABLES["day" if query.width == "1d" else "hour"], "bucket"
        bucket = "bucket"
    where = [f"{time_col} >= :start", f"{time_col} < :end"]
    endpoints = ENDPOINTS[query.kind]
    if endpoints is not None:
        where.append("endpoint = ANY(:endpoints)")
        params["endpoints"] = list(endpoints)
    for i, (group, values) in enumerate(query.filters):
        where.append(f"{COLUMNS[group]} = ANY(:f{i})")
        params[f"f{i}"] = list(values)
    groups = _groups(query)
    select = [f"extract(epoch FROM {bucket})::bigint AS bucket"]
    select += [f"{expr} AS {name}" for name, expr in groups]
    select += [f"{m[1] if raw else m[0]} AS {name}" for name, m in MEASURES.items()]
    positions = ", ".join(str(i) for i in range(1, len(groups) + 2))
    sql = (
        f"SELECT {', '.join(select)} FROM {source} WHERE {' AND '.join(where)}"
        f" GROUP BY {positions} ORDER BY {positions}"
    )
    return sql, params


def fetch_usage(engine: Engine, query: UsageQuery) -> list[dict[str, Any]]:
    """One page's grouped rows, in bucket then group order."""
    sql, params = usage_sql(query)
    with engine.begin() as conn:
        # JIT costs more than it saves on these small GROUP BYs
        conn.execute(text("SET LOCAL jit = off"))
        conn.execute(text("SET LOCAL statement_timeout = '30s'"))
        result = conn.execute(text(sql), params)
        return [dict(row._mapping) for row in result]
