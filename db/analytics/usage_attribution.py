"""The SQL behind the usage and costs API grouped or filtered by end user or tag (pure).

`bucket_width=1d` with only app (`project_id`) and team besides the end user or one tag
key reads the daily rollups `usage_rollup_user_daily` / `usage_rollup_tag_daily`
(docs/ROLLUPS.md): a 30-day question over 100,000 end users is one index range of one
table. Anything else (hour or minute buckets, a model, two tag keys, a user and a tag)
reads raw rows, and `usage_request.check_attribution` has already bounded such a page
to one day. Both give the same figures: the rollups are sums of the same rows.

Only rows with an end user count when grouping or filtering by user, only rows with the
tag key when grouping or filtering by tag (as the rollups hold them). Results in a bucket
come costliest first (actual cost, then requests, then the group), so `results_limit`
keeps the top of each bucket and says how many it left out.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from db.analytics.attribution_sql import (
    COSTLIEST,
    KINDS_CLOSED_BEFORE,
    TAG_TABLE,
    USER_KIND_TABLE,
    USER_TABLE,
)
from db.analytics.rollup_sql import STATE_TABLE
from db.analytics.usage_columns import COLUMNS, COMPLETION_ENDPOINTS, MEASURES, range_where
from db.analytics.usage_request import UsageQuery, rollup_answers

# the measures the attribution rollups keep (no baseline: not kept per end user or tag)
_MEASURES = {k: v for k, v in MEASURES.items() if k != "baseline_cost_usd"}


def attribution_sql(
    query: UsageQuery, endpoints: tuple[str, ...] | None
) -> tuple[str, dict[str, Any]]:
    """The statement answering one page of an attributed `query`, and its parameters."""
    rollup = rollup_answers(query)
    kind = _kind(endpoints)
    only_users = query.group_by == ("user",) and not (query.filters or query.tags or query.users)
    if rollup and kind and only_users:
        return _ranked_users_sql(query, kind)
    params: dict[str, Any] = {
        "start": dt.datetime.fromtimestamp(query.page_start, dt.UTC),
        "end": dt.datetime.fromtimestamp(query.page_end, dt.UTC),
    }
    tag_keys = [k for k, _ in query.tags] + ([query.tag_group] if query.tag_group else [])
    by_user = bool(query.users) or "user" in query.group_by
    if rollup:
        source = USER_TABLE if by_user or not tag_keys else TAG_TABLE
        time_col = bucket = "bucket"
        user_col = "end_user"
        tag_value = {k: "tag_value" for k in tag_keys}
    else:
        source, time_col = "usage_records", "started_at"
        bucket = f"date_trunc('{_UNITS[query.width]}', started_at, 'UTC')"
        user_col = "end_user"
        tag_value = {k: f"(tags ->> :tk{i})" for i, k in enumerate(dict.fromkeys(tag_keys))}
        params |= {f"tk{i}": k for i, k in enumerate(dict.fromkeys(tag_keys))}
    where = range_where(time_col, endpoints, query.filters, params)
    if by_user:
        where.append(f"{user_col} IS NOT NULL")
    if query.users:
        where.append(f"{user_col} = ANY(:users)")
        params["users"] = list(query.users)
    for k in dict.fromkeys(tag_keys):
        where.append(f"{tag_value[k]} IS NOT NULL")
    if rollup and tag_keys:
        where.append("tag_key = :tag_key")
        params["tag_key"] = tag_keys[0]
    for i, (_, values) in enumerate(query.tags):
        where.append(f"{tag_value[query.tags[i][0]]} = ANY(:tv{i})")
        params[f"tv{i}"] = list(values)
    groups: list[tuple[str, str]] = []
    for g in query.group_by:
        if g == "user":
            groups.append(("user_id", user_col))
        elif query.tag_group and g == f"tag:{query.tag_group}":
            groups.append(("tag_value", tag_value[query.tag_group]))
        else:
            for n in ("model", "provider") if g == "line_item" else (g,):
                if n not in {name for name, _ in groups}:
                    groups.append((n, COLUMNS[n]))
    select = [f"extract(epoch FROM {bucket})::bigint AS bucket"]
    select += [f"{expr} AS {name}" for name, expr in groups]
    select += [f"{m[0] if rollup else m[1]} AS {name}" for name, m in _MEASURES.items()]
    positions = ", ".join(str(i) for i in range(1, len(groups) + 2))
    names = ", ".join(name for name, _ in groups)
    costliest = "actual_cost_usd DESC NULLS LAST, requests DESC" + (f", {names}" if names else "")
    grouped = (
        f"SELECT {', '.join(select)} FROM {source} WHERE {' AND '.join(where)} GROUP BY {positions}"
    )
    if query.results_limit is None:
        return f"{grouped} ORDER BY bucket, {costliest}", params
    params["results_limit"] = query.results_limit
    sql = (
        f"SELECT * FROM (SELECT g.*, row_number() OVER (PARTITION BY bucket ORDER BY"
        f" {costliest}) AS rank, count(*) OVER (PARTITION BY bucket) AS bucket_groups"
        f" FROM ({grouped}) g) ranked WHERE rank <= :results_limit ORDER BY bucket, rank"
    )
    return sql, params


def _per_day(source: str, also: str, days_kept: str, limit: str) -> str:
    """For each day of `:days` that `days_kept` keeps: its count of end users in `source`
    (rows of that day, `also` ANDed), and its costliest `limit` of them, ranked. A day's
    count once per day (an index-only range on the rollup), not once per result; its
    costliest by a top-N sort, or the head of the ranking index on the rollup."""
    order = ", ".join(COSTLIEST)
    return (
        "SELECT extract(epoch FROM d.day)::bigint AS bucket, t.*, n.bucket_groups"
        " FROM unnest(CAST(:days AS timestamptz[])) AS d(day)"
        " CROSS JOIN LATERAL (SELECT count(*) AS bucket_groups"
        f" FROM {source} WHERE bucket = d.day{also}) n"
        f" CROSS JOIN LATERAL (SELECT end_user AS user_id, {_KIND_MEASURES},"
        f" row_number() OVER (ORDER BY {order}) AS rank FROM (SELECT * FROM {source}"
        f" WHERE bucket = d.day{also} ORDER BY {order}{limit}) x) t"
        f" WHERE {days_kept}"
    )


_UNITS = {"1m": "minute", "1h": "hour", "1d": "day"}
_KIND_MEASURES = ", ".join(name for name in _MEASURES)


def _kind(endpoints: tuple[str, ...] | None) -> str | None:
    """The kind of `usage_rollup_user_kind_daily` that covers exactly these endpoints."""
    if endpoints == ("embeddings",):
        return "embeddings"
    if endpoints is not None and set(endpoints) == set(COMPLETION_ENDPOINTS):
        return "completions"
    return None  # the costs: every endpoint, one kind would not do


def _ranked_users_sql(query: UsageQuery, kind: str) -> tuple[str, dict[str, Any]]:
    """Every day's end users of one kind, costliest first. A closed day (before
    `KINDS_CLOSED_BEFORE`) from the rollup that has one row per end user, day and kind:
    the head of one index range (`attribution_sql.RANK_INDEX`), nothing regrouped, and
    `results_limit` reads only that many rows a day. The open days (today, and any not
    closed yet) regroup that day's rows of the per-app user rollup. The same results, in
    the same order, as the grouped query."""
    params: dict[str, Any] = {"kind": kind}
    limit = ""
    if query.results_limit is not None:
        limit = " LIMIT :results_limit"
        params["results_limit"] = query.results_limit
    # the days whose bucket (their UTC midnight) is in [start, end), as the grouped query,
    # as an array: the planner then knows how many (a series it guesses at 1,000, and
    # spends more compiling the plan than running it)
    first = -(-query.page_start // 86400) * 86400
    params["days"] = [dt.datetime.fromtimestamp(t, dt.UTC)
                      for t in range(first, query.page_end, 86400)]  # fmt: skip
    closed = f"(SELECT {KINDS_CLOSED_BEFORE} FROM {STATE_TABLE})"
    closed_days = _per_day(USER_KIND_TABLE, " AND kind = :kind", f"d.day < {closed}", limit)
    # the open days: that day's per-app rows regrouped by end user, once (materialized),
    # then per day its count and its costliest (a top-N sort: only those are ranked)
    sums = ", ".join(f"{m[0]} AS {name}" for name, m in _MEASURES.items())
    params["open_from"] = dt.datetime.fromtimestamp(first, dt.UTC)
    params["end"] = dt.datetime.fromtimestamp(query.page_end, dt.UTC)
    # the kind as attribution_sql.kind_of gives it, written so the planner can count rows
    of_kind = "u.endpoint = 'embeddings'"
    if kind != "embeddings":
        of_kind = "u.endpoint IS DISTINCT FROM 'embeddings'"
    open_groups = (
        f"SELECT u.bucket, u.end_user, {sums} FROM {USER_TABLE} u"
        f" WHERE u.bucket >= greatest(CAST(:open_from AS timestamptz), {closed})"
        f" AND u.bucket < :end AND u.end_user IS NOT NULL AND {of_kind} GROUP BY 1, 2"
    )
    open_days = _per_day("open_groups", "", f"d.day >= coalesce({closed}, '-infinity')", limit)
    sql = (
        f"WITH open_groups AS MATERIALIZED ({open_groups})"
        f" SELECT * FROM ({closed_days} UNION ALL {open_days}) a ORDER BY bucket, rank"
    )
    return sql, params
