"""The SQL behind the usage and costs API and `costgate report` (docs/USAGE_API.md).

Day and hour buckets are sums over the rollups (`usage_rollup_daily`/`_hourly`, kept by
PostgreSQL as rows arrive: docs/ROLLUPS.md), minute buckets a GROUP BY over raw rows
(one page holds at most 1,440 minutes, so at most a day of them). By end user or tag:
`db.analytics.usage_attribution`. Either way the figures are the ledger's: NUMERIC
sums, never floats.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Engine, text

from db.analytics.rollup_sql import USAGE_TABLES
from db.analytics.usage_attribution import attribution_sql
from db.analytics.usage_columns import (
    COLUMNS,
    ENDPOINTS,
    MEASURES,
    RAW_ONLY_GROUPS,
    range_where,
)
from db.analytics.usage_request import UsageQuery


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
    if query.attributed:  # by end user or tag: their own rollups
        return attribution_sql(query, ENDPOINTS[query.kind])
    # by experiment or variant: raw rows of the experiments only (their partial index)
    experiments = bool(RAW_ONLY_GROUPS & set(query.group_by))
    raw = query.width == "1m" or experiments
    start = dt.datetime.fromtimestamp(query.page_start, dt.UTC)
    end = dt.datetime.fromtimestamp(query.page_end, dt.UTC)
    params: dict[str, Any] = {"start": start, "end": end}
    if raw:
        source, time_col = "usage_records", "started_at"
        unit = {"1m": "minute", "1h": "hour", "1d": "day"}[query.width]
        bucket = f"date_trunc('{unit}', started_at, 'UTC')"
    else:
        source, time_col = USAGE_TABLES["day" if query.width == "1d" else "hour"], "bucket"
        bucket = "bucket"
    where = range_where(time_col, ENDPOINTS[query.kind], query.filters, params)
    if experiments:
        where.append("experiment IS NOT NULL")
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
        # a day's end users regrouped from the per-app rollup (the open days of the
        # by-user ranking) hash about 100,000 groups: in memory, not in 37 batches on disk
        conn.execute(text("SET LOCAL work_mem = '64MB'"))
        conn.execute(text("SET LOCAL statement_timeout = '30s'"))
        result = conn.execute(text(sql), params)
        return [dict(row._mapping) for row in result]
