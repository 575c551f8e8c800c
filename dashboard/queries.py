"""Every SQL statement the dashboard runs, through SQLAlchemy, cached with a TTL.

Aggregation happens in PostgreSQL, so pages receive small frames however large the
ledger is: the cube (see `dashboard.cube`) and latency histograms (see
`dashboard.latency`), one page of the request log. Day and hour views sum the hourly and
daily rollups PostgreSQL keeps as rows arrive (docs/ROLLUPS.md: the cube's very
measures, kept by triggers in the writer's transaction), so a freshly started dashboard,
or a second replica, needs no warm-up of its own; minute views of a young ledger, and
drill-down, read raw rows.
Results are cached for `CACHE_TTL_S` seconds per (database, filters); the pages refresh
on a timer, so a new row shows up within that time.

A team-scoped user's filters carry `team_scope`, which every statement here applies
(`where_clause`, the drill-down by id): the scope is enforced where the rows are read,
not by what the pages offer.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine, text

from dashboard.cube import COUNTS, DIMENSIONS, MONEY, normalize_cube
from dashboard.filters import Filters
from dashboard.latency import BINS_PER_LN, normalize_histogram
from db.analytics.rollup_sql import LATENCY_TABLES, USAGE_TABLES
from db.engine import make_engine

CACHE_TTL_S = 30
REQUEST_LOG_LIMIT = 500

_CUBE_SQL = """
SELECT date_trunc(:grain, r.started_at AT TIME ZONE 'UTC') AS bucket,
       r.app, r.team, r.key_id::text AS key_id, r.alias, r.model, r.provider,
       r.endpoint, r.status, r.error_class,
       count(*) AS requests,
       coalesce(sum(r.prompt_tokens), 0) AS prompt_tokens,
       coalesce(sum(r.cached_prompt_tokens), 0) AS cached_prompt_tokens,
       coalesce(sum(r.completion_tokens), 0) AS completion_tokens,
       coalesce(sum(r.reasoning_tokens), 0) AS reasoning_tokens,
       count(*) FILTER (
           WHERE r.actual_cost_usd IS NULL
             AND (r.status IN ('ok', 'cancelled') OR r.usage_source = 'estimated')
       ) AS unknown_cost_requests,
       count(*) FILTER (WHERE r.usage_source = 'estimated') AS estimated_requests,
       sum(r.actual_cost_usd) AS actual_cost_usd,
       sum(r.list_cost_usd) AS list_cost_usd,
       sum(r.baseline_cost_usd) AS baseline_cost_usd,
       sum(r.list_cost_usd - r.actual_cost_usd) AS savings_usd,
       -- a response-cache hit cost 0: its whole list price is the cache's saving (a part
       -- of savings_usd)
       sum(r.list_cost_usd - r.actual_cost_usd) FILTER (WHERE r.cache_hit)
           AS cache_savings_usd,
       sum(r.list_cost_usd) FILTER (WHERE r.actual_cost_usd IS NOT NULL) AS priced_list_usd,
       sum(r.baseline_cost_usd - r.list_cost_usd) AS routing_savings_usd,
       -- multiplying by 0.000001 (not dividing by 1e6) keeps NUMERIC exact
       sum(r.cached_prompt_tokens * (pv.list_input - pv.list_cached_input) * 0.000001)
           AS cached_savings_usd
FROM usage_records r
LEFT JOIN price_versions pv ON pv.id = r.price_version_id
WHERE {where}
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
"""

_HISTOGRAM_SQL = """
SELECT date_trunc(:grain, r.started_at AT TIME ZONE 'UTC') AS bucket,
       r.app, r.team, r.model, r.provider, r.endpoint, m.metric,
       floor(ln(1 + m.ms::float8) * :bins_per_ln)::int AS bin,
       count(*) AS requests
FROM usage_records r
CROSS JOIN LATERAL (VALUES ('latency', r.latency_ms), ('ttft', r.ttft_ms)) AS m(metric, ms)
WHERE {where} AND r.status = 'ok' AND m.ms IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
"""

# the cube from a rollup: its measures summed over the dimensions the cube drops
# (requested model, billing currency, price version, baseline model), and over the ones
# a page does not slice by (`dims`: NULL in the frame, so the figures stay the same sums)
_ROLLUP_MEASURES = ", ".join(
    [f"sum(u.{c})::bigint AS {c}" for c in COUNTS] + [f"sum(u.{c}) AS {c}" for c in MONEY]
)


def _rollup_cube_sql(table: str, where: str, dims: tuple[str, ...] | None) -> str:
    kept = [d for d in DIMENSIONS[1:] if dims is None or d in dims]
    select = ", ".join(
        ("u.key_id::text" if d == "key_id" else f"u.{d}") + f" AS {d}"
        if d in kept
        else f"NULL AS {d}"
        for d in DIMENSIONS[1:]
    )
    group = ", ".join(["u.bucket", *(f"u.{d}" for d in kept)])
    return (
        f"SELECT u.bucket, {select}, {_ROLLUP_MEASURES} FROM {table} u "
        f"WHERE {where} GROUP BY {group}"
    )


# the histograms the pages read, summed over the dimensions they filter by in SQL but
# never show (app, team, provider, endpoint: NULL here): per day and model, a few
# hundred bins, where the rollup keeps one histogram per app, team, provider and endpoint
# a rollup row holds its group's histogram: `bins[b + 1]` requests in bin b (docs/ROLLUPS.md)
_ROLLUP_HISTOGRAM_SQL = (
    "SELECT u.bucket, NULL AS app, NULL AS team, {model} AS model, NULL AS provider, "
    "NULL AS endpoint, u.metric, e.i::int - 1 AS bin, sum(e.n)::bigint AS requests "
    "FROM {table} u CROSS JOIN LATERAL unnest(u.bins) WITH ORDINALITY AS e(n, i) "
    "WHERE {where} AND e.n > 0 GROUP BY u.bucket, {model}, u.metric, e.i"
)

REQUEST_COLUMNS = (
    "request_id, started_at, ended_at, app, team, key_id, requested_model, alias, model, "
    "provider, stream, status, http_status, error_class, prompt_tokens, "
    "cached_prompt_tokens, completion_tokens, reasoning_tokens, usage_source, latency_ms, "
    "ttft_ms, upstream_latency_ms, attempts, fallback_path, routing_policy, "
    "price_version_id, billing_currency, actual_cost, actual_cost_usd, list_cost_usd, "
    "baseline_model, baseline_cost_usd, endpoint, cache_write_tokens, cache_hit, "
    "trimmed_tokens"
)

# from the daily rollup (every value the ledger holds, in far fewer rows): the ledger
# has no index on every dimension, and a scan of 10M rows per widget would take seconds
_DISTINCT_SQL = (
    "SELECT DISTINCT {col} AS value FROM usage_rollup_daily WHERE {col} IS NOT NULL ORDER BY 1"
)


def where_clause(
    filters: Filters,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    alias: str = "r",
    time_column: str = "started_at",
) -> tuple[str, dict[str, Any]]:
    """The WHERE of every ledger (or rollup) query: a UTC time range plus the filters."""
    params: dict[str, Any] = {
        "start": start or filters.start_at,
        "end": end or filters.end_at,
    }
    parts = [f"{alias}.{time_column} >= :start", f"{alias}.{time_column} < :end"]
    if filters.team_scope is not None:
        parts.append(f"{alias}.team = :scope_team")
        params["scope_team"] = filters.team_scope
    for column, values in (
        ("app", filters.apps),
        ("team", filters.teams),
        ("model", filters.models),
        ("provider", filters.providers),
        ("endpoint", filters.endpoints),
    ):
        if values:
            parts.append(f"{alias}.{column} = ANY(:{column}s)")
            params[f"{column}s"] = list(values)
    return " AND ".join(parts), params


@st.cache_resource(show_spinner=False)
def engine_for(url: str) -> Engine:
    return make_engine(url, pool_size=4, max_overflow=4)


def _frame(url: str, sql: str, params: dict[str, Any], hash_groups: bool = False) -> pd.DataFrame:
    with engine_for(url).begin() as conn:
        if hash_groups:
            # the planner overestimates the groups and sorts ~1M rows; hashing the ~10k
            # real groups measured 1.8x faster here
            conn.execute(text("SET LOCAL enable_sort = off"))
        # GROUP BYs sort in memory rather than on disk; JIT costs more than it saves here
        conn.execute(text("SET LOCAL work_mem = '64MB'"))
        conn.execute(text("SET LOCAL jit = off"))
        result = conn.execute(text(sql), params)
        return pd.DataFrame(result.fetchall(), columns=list(result.keys()))


def _ledger_cube(
    url: str, filters: Filters, start: dt.datetime, end: dt.datetime, grain: str
) -> pd.DataFrame:
    where, params = where_clause(filters, start, end)
    params["grain"] = grain
    return normalize_cube(_frame(url, _CUBE_SQL.format(where=where), params, hash_groups=True))


def _ledger_histogram(
    url: str, filters: Filters, start: dt.datetime, end: dt.datetime, grain: str
) -> pd.DataFrame:
    where, params = where_clause(filters, start, end)
    params |= {"grain": grain, "bins_per_ln": BINS_PER_LN}
    sql = _HISTOGRAM_SQL.format(where=where)
    return normalize_histogram(_frame(url, sql, params, hash_groups=True))


def _floor(t: dt.datetime, grain: str) -> dt.datetime:
    if grain == "day":
        return t.replace(hour=0, minute=0, second=0, microsecond=0)
    return t.replace(minute=0, second=0, microsecond=0)


def _rollup_cube(
    url: str,
    filters: Filters,
    start: dt.datetime,
    end: dt.datetime,
    grain: str,
    dims: tuple[str, ...] | None,
) -> pd.DataFrame:
    where, params = where_clause(filters, _floor(start, grain), end, "u", "bucket")
    sql = _rollup_cube_sql(USAGE_TABLES[grain], where, dims)  # type: ignore[index]
    return normalize_cube(_frame(url, sql, params))


def _rollup_histogram(
    url: str,
    filters: Filters,
    start: dt.datetime,
    end: dt.datetime,
    grain: str,
    per_model: bool,
) -> pd.DataFrame:
    where, params = where_clause(filters, _floor(start, grain), end, "u", "bucket")
    table = LATENCY_TABLES[grain]  # type: ignore[index]
    model = "u.model" if per_model else "NULL::text"
    sql = _ROLLUP_HISTOGRAM_SQL.format(table=table, where=where, model=model)
    return normalize_histogram(_frame(url, sql, params))


@st.cache_data(ttl=5, show_spinner=False)
def data_lag(url: str) -> float | None:
    """Seconds the data at `url` is behind the primary (None: it is the primary)."""
    from db.engine import data_lag_s

    return data_lag_s(engine_for(url))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def cube(
    url: str,
    filters: Filters,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    dims: tuple[str, ...] | None = None,
) -> pd.DataFrame:
    """The cube for the filters' period (or [start, end)), at the filters' grain; with
    `dims`, only those dimensions keep their values (the others are None), which makes
    the frame of a page that slices by few of them small at any ledger size."""
    start, end = start or filters.start_at, end or filters.end_at
    if filters.grain == "minute":  # a young ledger's few hours: raw rows
        return _ledger_cube(url, filters, start, end, "minute")
    return _rollup_cube(url, filters, start, end, filters.grain, dims)


# what the overview shows: totals (errors are by status) and series over time
OVERVIEW_DIMS = ("status", "endpoint")  # endpoint: the waterfall's batch discount
# the savings page: by model and provider, the seeds' monthly table by model
SAVINGS_DIMS = ("model", "provider", "status", "endpoint")


def cube_with_previous(url: str, filters: Filters) -> pd.DataFrame:
    """One cube covering the previous period and this one, for period-over-period KPIs."""
    return cube(url, filters, filters.previous.start_at, filters.end_at, OVERVIEW_DIMS)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def histogram(
    url: str,
    filters: Filters,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    per_model: bool = True,
) -> pd.DataFrame:
    """Latency and TTFT histograms of successful requests, same period and grain as `cube`
    (`per_model=False`: one histogram per bucket, for a page showing no model)."""
    start, end = start or filters.start_at, end or filters.end_at
    if filters.grain == "minute":
        return _ledger_histogram(url, filters, start, end, "minute")
    return _rollup_histogram(url, filters, start, end, filters.grain, per_model)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def recent_requests(
    url: str,
    filters: Filters,
    statuses: tuple[str, ...] = (),
    limit: int = REQUEST_LOG_LIMIT,
) -> pd.DataFrame:
    """The newest requests matching the filters: metadata only (the ledger holds no prompts)."""
    where, params = where_clause(filters)
    if statuses:
        where += " AND r.status = ANY(:statuses)"
        params["statuses"] = list(statuses)
    params["limit"] = limit
    sql = (
        f"SELECT {REQUEST_COLUMNS} FROM usage_records r WHERE {where} "
        "ORDER BY r.started_at DESC LIMIT :limit"
    )
    return _frame(url, sql, params)


def request_by_id(url: str, request_id: str, *, team: str | None) -> dict[str, Any] | None:
    """One request by id; `team` (a team-scoped user's) hides other teams' requests."""
    sql = f"SELECT {REQUEST_COLUMNS} FROM usage_records r WHERE r.request_id::text = :rid"
    params: dict[str, Any] = {"rid": request_id.strip().lower()}
    if team is not None:
        sql += " AND r.team = :team"
        params["team"] = team
    frame = _frame(url, sql, params)
    if frame.empty:
        return None
    # labels are the SELECT's column names; to_dict also boxes numpy scalars as Python's
    return {str(column): value for column, value in frame.iloc[0].to_dict().items()}


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def dimension_values(url: str, team: str | None = None) -> dict[str, list[str]]:
    """Values offered by the filter widgets; for a team-scoped user, its team and the
    apps registered to it (models, providers and endpoints are shared by all)."""
    out = {}
    shared = ("model", "provider", "endpoint")
    for column in shared if team is not None else ("app", *shared):
        out[column] = _frame(url, _DISTINCT_SQL.format(col=column), {})["value"].tolist()
    if team is None:
        teams = _frame(url, "SELECT name AS value FROM teams ORDER BY name", {})
        out["team"] = teams["value"].tolist()
    else:
        out["team"] = [team]
        out["app"] = _frame(
            url,
            "SELECT a.name AS value FROM apps a JOIN teams t ON t.id = a.team_id "
            "WHERE t.name = :team ORDER BY a.name",
            {"team": team},
        )["value"].tolist()
    return out


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def ledger_bounds(url: str) -> tuple[dt.date | None, dt.date | None]:
    """UTC days of the ledger's first and last request (None, None when it is empty):
    two probes of the started_at index."""
    frame = _frame(
        url, "SELECT min(started_at) AS first, max(started_at) AS last FROM usage_records", {}
    )
    first, last = frame["first"].iloc[0], frame["last"].iloc[0]
    if first is None or pd.isna(first):
        return None, None
    return (
        pd.Timestamp(first).tz_convert("UTC").date(),
        pd.Timestamp(last).tz_convert("UTC").date(),
    )


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def first_request_at(url: str) -> dt.datetime | None:
    """When the ledger's first request started (one probe of the started_at index)."""
    frame = _frame(url, "SELECT min(started_at) AS first FROM usage_records", {})
    first = frame["first"].iloc[0]
    if first is None or pd.isna(first):
        return None
    return pd.Timestamp(first).tz_convert("UTC").to_pydatetime()


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def holds_seeded(url: str) -> bool:
    """Whether `costgate seed` (or the demo) wrote synthetic history here: its audit row
    (actor 'seed', gateway/devtools/seed.py) comes and goes with the seeded rows."""
    sql = "SELECT EXISTS (SELECT 1 FROM routing_changes WHERE actor = 'seed') AS seeded"
    return bool(_frame(url, sql, {})["seeded"].iloc[0])


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def ledger_is_empty(url: str) -> bool:
    frame = _frame(url, "SELECT NOT EXISTS (SELECT 1 FROM usage_records) AS empty", {})
    return bool(frame["empty"].iloc[0])


@st.cache_data(ttl=5, show_spinner=False)
def routing_changes(url: str, app_name: str | None, limit: int = 200) -> pd.DataFrame:
    where = "WHERE app_name = :app" if app_name else ""
    sql = (
        "SELECT id, changed_at, actor, app_name, alias, before, after, note "
        f"FROM routing_changes {where} ORDER BY changed_at DESC, id DESC LIMIT :limit"
    )
    return _frame(url, sql, {"app": app_name, "limit": limit})


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def key_labels(url: str) -> dict[str, str]:
    """key id -> 'prefix… (app)': keys are told apart by their prefix, never shown whole."""
    frame = _frame(
        url,
        "SELECT k.id::text AS id, k.prefix, a.name AS app FROM api_keys k "
        "JOIN apps a ON a.id = k.app_id",
        {},
    )
    return {str(r.id): f"{r.prefix}… ({r.app})" for r in frame.itertuples()}  # id::text
