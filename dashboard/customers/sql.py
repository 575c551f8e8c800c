"""The Customers page's and the tag breakdown's statements, as text (pure).

Each figure is one statement over one bucket range of one attribution rollup (their
unique key starts with bucket, so the range is an index range), aggregated in
PostgreSQL and cut with LIMIT: the dashboard receives tens of rows however many end
users the range holds. Percentiles are `percentile_disc`, an actual user-day's (or
session's) cost, so they stay exact NUMERIC like every other amount.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from dashboard.filters import Filters
from db.analytics.attribution_sql import SESSION_TABLE, TAG_TABLE, USER_TABLE

TOP_LIMIT = 100
PERCENTILES = (0.5, 0.9, 0.99)
SESSION_PERCENTILES = (0.5, 0.9)


def day_range(filters: Filters) -> tuple[dt.datetime, dt.datetime]:
    """The whole UTC days the filters cover: the rollups are daily."""
    start = dt.datetime.combine(filters.start, dt.time(), dt.UTC)
    end = dt.datetime.combine(filters.end + dt.timedelta(days=1), dt.time(), dt.UTC)
    return start, end


def rollup_where(
    filters: Filters,
    table: str,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
) -> tuple[str, dict[str, Any]]:
    """The WHERE over `table` (alias u): the day range first (the index's first column),
    the team scope, then the filters the table can honour (`dashboard.filters.ignored_by`
    names the others for the page to say so)."""
    first, last = day_range(filters)
    params: dict[str, Any] = {"start": start or first, "end": end or last}
    parts = ["u.bucket >= :start", "u.bucket < :end"]
    if filters.team_scope is not None:
        parts.append("u.team = :scope_team")
        params["scope_team"] = filters.team_scope
    if filters.apps:
        parts.append("u.app = ANY(:apps)")
        params["apps"] = list(filters.apps)
    if filters.teams:
        parts.append("u.team = ANY(:teams)")
        params["teams"] = list(filters.teams)
    if filters.endpoints and table in (USER_TABLE, TAG_TABLE):  # no endpoint per session
        parts.append("u.endpoint = ANY(:endpoints)")
        params["endpoints"] = list(filters.endpoints)
    if filters.end_users and table in (USER_TABLE, SESSION_TABLE):
        parts.append("u.end_user = ANY(:end_users)")
        params["end_users"] = list(filters.end_users)
    if filters.tag_filter and table == TAG_TABLE:
        parts.append("u.tag_key = :tag_key AND u.tag_value = ANY(:tag_values)")
        params |= {"tag_key": filters.tag_key, "tag_values": list(filters.tag_values)}
    return " AND ".join(parts), params


def _array(values: tuple[float, ...]) -> str:
    return "ARRAY[" + ", ".join(str(v) for v in values) + "]"


def users_sql(where: str) -> str:
    """Top end users by spend (LIMIT :limit) with, on every row, the range's end users and
    spend (a window over the grouped rows, before the LIMIT). With no user in range it
    returns no row."""
    return f"""
SELECT u.end_user, sum(u.requests)::bigint AS requests,
       sum(u.prompt_tokens + u.completion_tokens)::bigint AS tokens,
       sum(u.unknown_cost_requests)::bigint AS unknown_cost_requests,
       sum(u.actual_cost_usd) AS spend_usd,
       count(*) OVER ()::bigint AS end_users, sum(sum(u.actual_cost_usd)) OVER () AS total_spend_usd
FROM {USER_TABLE} u WHERE {where}
GROUP BY u.end_user
ORDER BY spend_usd DESC NULLS LAST, u.end_user LIMIT :limit
"""


def user_days_sql(where: str) -> str:
    """The distribution of cost per end user per UTC day over the range: count, mean,
    max and percentiles (one row)."""
    return f"""
SELECT count(*)::bigint AS user_days, count(cost)::bigint AS priced_user_days,
       percentile_disc({_array(PERCENTILES)}) WITHIN GROUP (ORDER BY cost) AS day_pcts,
       max(cost) AS day_max_usd, avg(cost) AS day_mean_usd
FROM (
    SELECT sum(u.actual_cost_usd) AS cost FROM {USER_TABLE} u WHERE {where}
    GROUP BY u.bucket, u.end_user
) user_days
"""


def sessions_sql(where: str) -> str:
    """Cost per session over the range (a session spanning days summed whole), its count,
    mean and percentiles, and the costliest sessions (LIMIT :limit): one scan."""
    return f"""
WITH per_session AS MATERIALIZED (
    SELECT u.session_id, min(u.end_user) AS end_user, min(u.app) AS app,
           sum(u.requests)::bigint AS requests, sum(u.actual_cost_usd) AS cost_usd,
           min(u.bucket) AS first_day, count(*)::bigint AS rows
    FROM {SESSION_TABLE} u WHERE {where}
    GROUP BY u.session_id
), totals AS (
    SELECT count(*)::bigint AS sessions, count(cost_usd)::bigint AS priced_sessions,
           avg(cost_usd) AS mean_usd, max(cost_usd) AS max_usd,
           percentile_disc({_array(SESSION_PERCENTILES)}) WITHIN GROUP (ORDER BY cost_usd)
               AS pcts
    FROM per_session
)
SELECT top.session_id, top.end_user, top.app, top.requests, top.cost_usd, top.first_day,
       totals.*
FROM totals LEFT JOIN LATERAL (
    SELECT * FROM per_session ORDER BY cost_usd DESC NULLS LAST, session_id LIMIT :limit
) top ON TRUE
ORDER BY top.cost_usd DESC NULLS LAST, top.session_id
"""


def growth_sql(where: str) -> str:
    """Per end user, spend in the last 7 days of the range (from :mid) and the 7 before,
    the largest absolute increases first (LIMIT :limit); `where` spans both weeks."""
    return f"""
WITH weeks AS (
    SELECT u.end_user,
           coalesce(sum(u.actual_cost_usd) FILTER (WHERE u.bucket < :mid), 0) AS before_usd,
           coalesce(sum(u.actual_cost_usd) FILTER (WHERE u.bucket >= :mid), 0) AS recent_usd
    FROM {USER_TABLE} u WHERE {where}
    GROUP BY u.end_user
)
SELECT end_user, before_usd, recent_usd, recent_usd - before_usd AS increase_usd
FROM weeks WHERE recent_usd > before_usd
ORDER BY increase_usd DESC, end_user LIMIT :limit
"""


def margins_sql(where: str, plans: bool) -> str:
    """Spend against revenue per end user active in the range: :revenue each (a price per
    seat), or with `plans` the revenue of each user's plan (arrays :plan_users and
    :plan_revenue; a user without a plan has no revenue, so no margin). The rows with the
    lowest margin first (LIMIT :limit); totals and the count of end users costing more
    than they pay on every row."""
    if plans:
        revenue = "p.revenue_usd"
        join = (
            "LEFT JOIN unnest(CAST(:plan_users AS text[]), CAST(:plan_revenue AS numeric[])) "
            "AS p(end_user, revenue_usd) ON p.end_user = s.end_user"
        )
    else:
        revenue, join = "CAST(:revenue AS numeric)", ""
    return f"""
WITH spend AS (
    SELECT u.end_user, sum(u.requests)::bigint AS requests, sum(u.actual_cost_usd) AS spend_usd
    FROM {USER_TABLE} u WHERE {where}
    GROUP BY u.end_user
), m AS (
    SELECT s.end_user, s.requests, s.spend_usd, {revenue} AS revenue_usd FROM spend s {join}
), totals AS (
    SELECT count(*)::bigint AS end_users, count(revenue_usd)::bigint AS with_revenue,
           count(*) FILTER (WHERE spend_usd > revenue_usd)::bigint AS losing,
           sum(spend_usd) FILTER (WHERE revenue_usd IS NOT NULL) AS total_spend_usd,
           sum(revenue_usd) AS total_revenue_usd
    FROM m
)
SELECT top.end_user, top.requests, top.spend_usd, top.revenue_usd,
       top.revenue_usd - top.spend_usd AS margin_usd, totals.*
FROM totals LEFT JOIN LATERAL (
    SELECT * FROM m WHERE revenue_usd IS NOT NULL
    ORDER BY revenue_usd - spend_usd NULLS LAST, end_user LIMIT :limit
) top ON TRUE
ORDER BY top.revenue_usd - top.spend_usd NULLS LAST, top.end_user
"""


def tag_series_sql(where: str) -> str:
    """Spend per day and value of one tag key (:tag_key) over the range."""
    return f"""
SELECT u.bucket, u.tag_value, sum(u.requests)::bigint AS requests,
       sum(u.prompt_tokens + u.completion_tokens)::bigint AS tokens,
       sum(u.unknown_cost_requests)::bigint AS unknown_cost_requests,
       sum(u.actual_cost_usd) AS actual_cost_usd, sum(u.list_cost_usd) AS list_cost_usd,
       sum(u.savings_usd) AS savings_usd
FROM {TAG_TABLE} u WHERE {where} AND u.tag_key = :series_key
GROUP BY u.bucket, u.tag_value
"""


# a team-scoped user's own team only (:team NULL: every team)
_TEAM = "(CAST(:team AS text) IS NULL OR team = :team)"
TAG_KEYS_SQL = f"SELECT DISTINCT tag_key AS value FROM {TAG_TABLE} WHERE {_TEAM} ORDER BY 1"
TAG_VALUES_SQL = (
    f"SELECT DISTINCT tag_value AS value FROM {TAG_TABLE} WHERE tag_key = :key AND {_TEAM} "
    "ORDER BY 1 LIMIT :limit"
)


def attributed_series_sql(table: str, where: str, by: str) -> str:
    """Spend per day (and per app or team, `by`) of the rows an end-user or tag filter
    selects, from the user or tag rollup."""
    return f"""
SELECT u.bucket, u.{by}, sum(u.requests)::bigint AS requests,
       sum(u.prompt_tokens + u.completion_tokens)::bigint AS tokens,
       sum(u.unknown_cost_requests)::bigint AS unknown_cost_requests,
       sum(u.actual_cost_usd) AS actual_cost_usd, sum(u.list_cost_usd) AS list_cost_usd,
       sum(u.savings_usd) AS savings_usd
FROM {table} u WHERE {where}
GROUP BY u.bucket, u.{by}
"""


def user_export_sql(where: str) -> str:
    """Spend per UTC day, app, team and end user over the range (the export's rows)."""
    return f"""
SELECT (u.bucket AT TIME ZONE 'UTC')::date AS day, u.app, u.team, u.end_user,
       sum(u.requests)::bigint AS requests, sum(u.prompt_tokens)::bigint AS prompt_tokens,
       sum(u.completion_tokens)::bigint AS completion_tokens,
       sum(u.actual_cost_usd) AS spend_usd, sum(u.list_cost_usd) AS list_spend_usd
FROM {USER_TABLE} u WHERE {where}
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
"""


def tag_export_sql(where: str) -> str:
    """Spend per UTC day, app, team, tag key and value over the range (the export's rows);
    a request with several tags is on one row per tag."""
    return f"""
SELECT (u.bucket AT TIME ZONE 'UTC')::date AS day, u.app, u.team, u.tag_key, u.tag_value,
       sum(u.requests)::bigint AS requests, sum(u.actual_cost_usd) AS spend_usd,
       sum(u.list_cost_usd) AS list_spend_usd
FROM {TAG_TABLE} u WHERE {where}
GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
"""
