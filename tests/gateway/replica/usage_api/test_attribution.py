"""The usage and costs API by end user and by tag, on the gateway's own FastAPI app (the
routes a Serve replica runs) in process over a real PostgreSQL ledger: every total equals
a plain SQL sum over the raw rows, from the rollups (days) and from raw rows (hours, two
tag keys); what neither can answer fast is a 400 naming the parameter."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, text

from db.analytics.usage_columns import COMPLETION_ENDPOINTS
from tests.db.analytics.attribution_seed import END, START, reopen_days, write_attributed
from tests.gateway.replica.usage_api.admin_client import admin_client

S, E = int(START.timestamp()), int(END.timestamp())
Api = Any


@pytest.fixture
def api(database_url: str, ledger_engine: Engine, clean_ledger: None) -> Any:
    write_attributed(database_url)
    with admin_client(database_url) as client:
        yield client


def pages(get: Api, path: str, **params: Any) -> list[dict[str, Any]]:
    buckets, page = [], None
    for _ in range(20):  # bounded: 3 days
        r = get(path, **params, **({"page": page} if page else {}))
        assert r.status_code == 200, r.text
        body = json.loads(r.text, parse_float=Decimal)
        buckets += body["data"]
        if not body["has_more"]:
            return buckets
        page = body["next_page"]
    raise AssertionError("more than 20 pages")


def sql(engine: Engine, query: str, **params: Any) -> dict[Any, tuple[Any, ...]]:
    """{first column: the rest} of a GROUP BY over raw rows."""
    with engine.connect() as conn:
        return {r[0]: tuple(r[1:]) for r in conn.execute(text(query), params).all()}


def scalar(engine: Engine, query: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(text(query)).scalar_one()


def summed(buckets: list[dict[str, Any]], key: Any, *fields: str) -> dict[Any, tuple[Any, ...]]:
    out: dict[Any, list[Any]] = {}
    for b in buckets:
        for r in b["results"]:
            values = [r[f]["value"] if isinstance(r[f], dict) else r[f] for f in fields]
            acc = out.setdefault(key(r), [None] * len(fields))
            for i, v in enumerate(values):
                acc[i] = v if acc[i] is None else acc[i] if v is None else acc[i] + v
    return {k: tuple(v) for k, v in out.items()}


def test_costs_by_user_from_the_rollup_equal_raw_sums(api: Api, ledger_engine: Engine) -> None:
    buckets = pages(api, "costs", start_time=S, end_time=E, group_by="user", limit=7)
    assert len(buckets) == 3 and all(b["results"] for b in buckets)
    first = buckets[0]["results"][0]
    assert first["object"] == "organization.costs.result" and first["user_id"].startswith("user-")
    assert first["baseline_amount"]["value"] is None  # not kept per end user
    costs = [r["amount"]["value"] or 0 for r in buckets[0]["results"]]
    assert costs == sorted(costs, reverse=True)  # costliest first
    got = summed(buckets, lambda r: r["user_id"], "amount", "list_amount", "num_model_requests",
                 "unknown_cost_requests")  # fmt: skip
    want = sql(ledger_engine, "SELECT end_user, sum(actual_cost_usd), sum(list_cost_usd),"
               " count(*), count(*) FILTER (WHERE actual_cost_usd IS NULL AND status = 'ok')"
               " FROM usage_records WHERE end_user IS NOT NULL GROUP BY 1")  # fmt: skip
    assert got == want and len(want) == 7


def test_completions_by_user_and_app_filtered_count_completion_endpoints_only(
    api: Api, ledger_engine: Engine
) -> None:
    buckets = pages(api, "usage/completions", start_time=S, end_time=E,
                    group_by="user_id,project_id", project_ids="search,support")  # fmt: skip
    got = summed(buckets, lambda r: (r["user_id"], r["project_id"]), "input_tokens",
                 "output_tokens", "input_cached_tokens", "num_model_requests")  # fmt: skip
    want = sql(ledger_engine, "SELECT (end_user, app)::text, coalesce(sum(prompt_tokens), 0),"
               " coalesce(sum(completion_tokens), 0), coalesce(sum(cached_prompt_tokens), 0),"
               " count(*) FROM usage_records WHERE end_user IS NOT NULL"
               " AND app IN ('search', 'support') AND endpoint = ANY(:e) GROUP BY 1",
               e=list(COMPLETION_ENDPOINTS))  # fmt: skip
    assert {f"({u},{a})": v for (u, a), v in got.items()} == want
    embeddings = pages(api, "usage/embeddings", start_time=S, end_time=E,
                       users=["user-1,user-3", "user-5"])  # fmt: skip
    n = scalar(ledger_engine, "SELECT count(*) FROM usage_records WHERE endpoint ="
               " 'embeddings' AND end_user IN ('user-1', 'user-3', 'user-5')")  # fmt: skip
    assert sum(r["num_model_requests"] for b in embeddings for r in b["results"]) == n > 0


def test_costs_by_tag_from_the_rollup_and_filtered_by_tag(api: Api, ledger_engine: Engine) -> None:
    buckets = pages(api, "costs", start_time=S, end_time=E, group_by="tag:feature,team")
    got = summed(buckets, lambda r: f"{r['tags']['feature']}|{r['team'] or '-'}", "amount",
                 "num_model_requests")  # fmt: skip
    want = sql(ledger_engine, "SELECT tags->>'feature' || '|' || coalesce(team, '-'),"
               " sum(actual_cost_usd), count(*) FROM usage_records WHERE tags ? 'feature'"
               " GROUP BY 1")  # fmt: skip
    assert got == want and len(want) == 9
    one = pages(api, "costs", start_time=S, end_time=E, tags=["feature:search", "feature:chat"])
    total = scalar(ledger_engine, "SELECT sum(actual_cost_usd) FROM usage_records"
                   " WHERE tags->>'feature' IN ('search', 'chat')")  # fmt: skip
    assert sum(r["amount"]["value"] for b in one for r in b["results"]) == total > 0


def test_two_tag_keys_and_hour_buckets_read_raw_rows_one_day_a_page(
    api: Api, ledger_engine: Engine
) -> None:
    # two keys ANDed: raw rows, so a 1d page is one day (limit=1)
    buckets = pages(api, "costs", start_time=S, end_time=E, group_by="tag:feature",
                    tags="env:prod", limit=1)  # fmt: skip
    assert len(buckets) == 3
    got = summed(buckets, lambda r: r["tags"]["feature"], "amount", "num_model_requests")
    want = sql(ledger_engine, "SELECT tags->>'feature', sum(actual_cost_usd), count(*) FROM"
               " usage_records WHERE tags->>'env' = 'prod' AND tags ? 'feature' GROUP BY 1")
    assert got == want
    hours = pages(api, "costs", start_time=S, end_time=E, bucket_width="1h", group_by="user",
                  users="user-2")  # fmt: skip
    assert len(hours) == 72
    by_hour = {b["start_time"]: b["results"][0]["num_model_requests"] for b in hours
               if b["results"]}  # fmt: skip
    want_h = sql(ledger_engine, "SELECT extract(epoch FROM date_trunc('hour', started_at, 'UTC'))"
                 "::bigint, count(*) FROM usage_records WHERE end_user = 'user-2' GROUP BY 1")
    assert by_hour == {k: v[0] for k, v in want_h.items()}


def test_results_limit_keeps_the_costliest_and_counts_the_rest(api: Api) -> None:
    every = pages(api, "costs", start_time=S, end_time=E, group_by="user")
    top = pages(api, "costs", start_time=S, end_time=E, group_by="user", results_limit=2)
    for full, cut in zip(every, top, strict=True):
        assert cut["results"] == full["results"][:2]
        assert cut["results_omitted"] == len(full["results"]) - len(cut["results"])


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"group_by": "user", "bucket_width": "1h", "limit": 48}, "group_by"),
        ({"group_by": "user,model", "limit": 2}, "group_by"),
        ({"group_by": "tag:a,tag:b"}, "group_by"),
        ({"tags": "feature"}, "tags"),
        ({"results_limit": 5}, "results_limit"),
        ({"group_by": "user", "results_limit": 0}, "results_limit"),
    ],
)
def test_what_the_rollups_cannot_answer_fast_is_a_400_naming_it(
    api: Api, params: dict[str, Any], param: str
) -> None:
    r = api("costs", start_time=S, end_time=E, **params)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


@pytest.mark.parametrize("path", ["usage/completions", "usage/embeddings"])
@pytest.mark.parametrize("limit", [None, 2])
@pytest.mark.parametrize("open_since", [None, 1, 0], ids=["closed", "last-2-open", "all-open"])
def test_by_user_alone_reads_one_row_per_user_and_day_with_the_grouped_querys_answer(
    api: Api,
    ledger_engine: Engine,
    reopens_days: None,
    path: str,
    limit: int | None,
    open_since: int | None,
) -> None:
    # by user and nothing else: the per-kind rollup, ranked by its index, for the closed
    # days, the per-app rollup regrouped for the open ones; with a filter that keeps every
    # app, the grouped query over the per-app rollup: the same pages
    if open_since is not None:
        reopen_days(ledger_engine, START + dt.timedelta(days=open_since))
    apps = ",".join(sql(ledger_engine, "SELECT DISTINCT app FROM usage_records"))
    extra = {} if limit is None else {"results_limit": limit}
    ranked = pages(api, path, start_time=S, end_time=E, group_by="user_id", **extra)
    grouped = pages(api, path, start_time=S, end_time=E, group_by="user_id",
                    project_ids=apps, **extra)  # fmt: skip
    assert ranked == grouped
    assert sum(len(b["results"]) for b in ranked) > 0
    if limit is not None and path == "usage/completions":
        assert any(b["results_omitted"] > 0 for b in ranked)
