"""The usage and costs API on the deployed gateway (Ray Serve, the sim, PostgreSQL): its
totals are plain SQL sums over the ledger, late rows included; admin keys only; bad
parameters are 400s naming the parameter; pages walk the range; no call leaves a row."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text

from db.analytics.usage_columns import COMPLETION_ENDPOINTS

pytestmark = pytest.mark.ray

MESSAGES = [{"role": "user", "content": "Three words on ledgers."}]
MODELS = ("gpt-4.1", "deepseek-v3.2", "relay-gpt-4.1", "auto")
LATE_APP = "usage-api-late"


def _engine(gateway: Any) -> Engine:
    return create_engine(gateway.database_url)


def _get(gateway: Any, path: str, key: str, **params: Any) -> httpx.Response:
    return httpx.get(
        f"{gateway.base_url}/v1/organization/{path}",
        params=params,
        headers={"authorization": f"Bearer {key}"},
        timeout=30,
    )


def _page(gateway: Any, path: str, **params: Any) -> dict[str, Any]:
    r = _get(gateway, path, gateway.admin_key, **params)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = json.loads(r.text, parse_float=Decimal)  # money: exact
    return body


def _all_pages(gateway: Any, path: str, **params: Any) -> list[dict[str, Any]]:
    buckets, page = [], None
    for _ in range(50):  # bounded: the ranges below have at most a few pages
        body = _page(gateway, path, **params, **({"page": page} if page else {}))
        buckets += body["data"]
        if not body["has_more"]:
            return buckets
        page = body["next_page"]
    raise AssertionError("more than 50 pages")


def _sql(gateway: Any, sql: str, **params: Any) -> list[Any]:
    engine = _engine(gateway)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql), params).all())
    finally:
        engine.dispose()


def _settled(gateway: Any) -> int:
    """Wait until the ledger stops growing (writers flush about every second)."""
    last = -1
    for _ in range(30):
        (n,), = _sql(gateway, "SELECT count(*) FROM usage_records")
        if n == last:
            return int(n)
        last = n
        time.sleep(1.5)
    raise AssertionError("the ledger kept growing")


@pytest.fixture(scope="module")
def traffic(gateway: Any) -> dict[str, int]:
    """Requests through the gateway, one embeddings call, and a late row of 5 days ago."""
    with gateway.client() as client:
        for i in range(12):
            r = client.post(
                "/v1/chat/completions",
                json={"model": MODELS[i % len(MODELS)], "messages": MESSAGES, "max_tokens": 20},
            )
            assert r.status_code == 200, r.text
        r = client.post(
            "/v1/embeddings", json={"model": "text-embedding-3-small", "input": ["a", "b"]}
        )
        assert r.status_code == 200, r.text
    _settled(gateway)
    # a writer replaying its spool after an outage: an old started_at, inserted now
    at = dt.datetime.now(dt.UTC) - dt.timedelta(days=5)
    engine = _engine(gateway)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO usage_records (request_id, started_at, ended_at, app,"
                    " requested_model, model, provider, stream, status, http_status,"
                    " usage_source, latency_ms, attempts, prompt_tokens, completion_tokens,"
                    " cached_prompt_tokens, actual_cost_usd, list_cost_usd, baseline_cost_usd)"
                    " VALUES (:id, :at, :at, :app, 'gpt-4.1', 'gpt-4.1', 'openai', false, 'ok',"
                    " 200, 'provider', 900, 1, 1234, 56, 7, 0.0123456789, 0.0123456789, 0.02)"
                ),
                {"id": uuid.uuid4(), "at": at, "app": LATE_APP},
            )
    finally:
        engine.dispose()
    now = int(time.time())
    return {"start": now - 9 * 86400, "end": now + 3600}


def _sum_results(buckets: list[dict[str, Any]], field: str) -> Any:
    total: Any = 0
    for b in buckets:
        for r in b["results"]:
            v = r[field]["value"] if isinstance(r[field], dict) else r[field]
            total += v or 0
    return total


def _by(buckets: list[dict[str, Any]], group: str, field: str) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for b in buckets:
        for r in b["results"]:
            out[r[group]] = out.get(r[group], 0) + r[field]
    return out


def _range(span: dict[str, int], width: int) -> dict[str, dt.datetime]:
    start = span["start"] // width * width
    end = -(-span["end"] // width) * width
    at = dt.datetime.fromtimestamp
    return {"s": at(start, dt.UTC), "e": at(end, dt.UTC)}


def test_completions_by_model_equal_sql_sums_over_the_ledger_late_row_included(
    gateway: Any, traffic: dict[str, int]
) -> None:
    buckets = _all_pages(
        gateway, "usage/completions", start_time=traffic["start"], end_time=traffic["end"],
        bucket_width="1d", group_by="model", limit=31,
    )
    rows = _sql(
        gateway,
        "SELECT model, count(*), coalesce(sum(prompt_tokens), 0),"
        " coalesce(sum(completion_tokens), 0), coalesce(sum(cached_prompt_tokens), 0)"
        " FROM usage_records WHERE started_at >= :s AND started_at < :e"
        " AND endpoint = ANY(:ep) GROUP BY model",
        ep=list(COMPLETION_ENDPOINTS), **_range(traffic, 86400),
    )
    assert _by(buckets, "model", "num_model_requests") == {m: n for m, n, *_ in rows}
    assert _by(buckets, "model", "input_tokens") == {m: int(p) for m, _, p, *_ in rows}
    assert _by(buckets, "model", "output_tokens") == {m: int(c) for m, *_, c, _ in rows}
    assert _by(buckets, "model", "input_cached_tokens") == {m: int(c) for m, *_, c in rows}
    late = _page(gateway, "usage/completions", start_time=traffic["start"],
                 end_time=traffic["end"], group_by="project_id", project_ids=LATE_APP, limit=31)
    assert _sum_results(late["data"], "input_tokens") == 1234


def test_costs_and_embeddings_equal_sql_sums_and_money_is_exact(
    gateway: Any, traffic: dict[str, int]
) -> None:
    costs = _all_pages(gateway, "costs", start_time=traffic["start"], end_time=traffic["end"],
                       group_by=["project_id", "line_item"], limit=31)
    (want,), = _sql(
        gateway,
        "SELECT sum(actual_cost_usd) FROM usage_records WHERE started_at >= :s"
        " AND started_at < :e", **_range(traffic, 86400),
    )
    assert isinstance(want, Decimal) and _sum_results(costs, "amount") == want
    results = [r for b in costs for r in b["results"]]
    assert {r["amount"]["currency"] for r in results} == {"usd"}
    assert any(r["line_item"] == "gpt-4.1, openai" for r in results)
    assert any(r["project_id"] == LATE_APP and r["amount"]["value"] == Decimal("0.0123456789")
               for r in results)
    emb = _all_pages(gateway, "usage/embeddings", start_time=traffic["start"],
                     end_time=traffic["end"], limit=31)
    (tokens, n), = _sql(
        gateway,
        "SELECT coalesce(sum(prompt_tokens), 0), count(*) FROM usage_records"
        " WHERE endpoint = 'embeddings' AND started_at >= :s AND started_at < :e",
        **_range(traffic, 86400),
    )
    assert n >= 1 and _sum_results(emb, "input_tokens") == tokens
    assert _sum_results(emb, "num_model_requests") == n


def test_minute_and_hour_buckets_page_through_the_range_to_the_same_totals(
    gateway: Any, traffic: dict[str, int]
) -> None:
    end = -(-traffic["end"] // 3600) * 3600  # whole hours: 30 buckets exactly
    hours = _all_pages(gateway, "usage/completions", start_time=end - 30 * 3600,
                       end_time=end, bucket_width="1h", limit=7)
    assert len(hours) == 30 == len({b["start_time"] for b in hours})
    assert [b["end_time"] - b["start_time"] for b in hours] == [3600] * 30
    minutes = _all_pages(gateway, "usage/completions", start_time=end - 2 * 3600,
                         end_time=end, bucket_width="1m", limit=50)
    assert len(minutes) == 120
    span = {"start": end - 2 * 3600, "end": end}
    (n,), = _sql(
        gateway,
        "SELECT count(*) FROM usage_records WHERE started_at >= :s AND started_at < :e"
        " AND endpoint = ANY(:ep)", ep=list(COMPLETION_ENDPOINTS), **_range(span, 60),
    )
    assert _sum_results(hours[-2:], "num_model_requests") == n
    assert n >= 12 and _sum_results(minutes, "num_model_requests") == n


def test_an_app_key_gets_403_and_no_key_401_in_openais_shape(
    gateway: Any, traffic: dict[str, int]
) -> None:
    for path in ("usage/completions", "usage/embeddings", "costs"):
        r = _get(gateway, path, gateway.api_key, start_time=traffic["start"])
        assert r.status_code == 403, r.text
        assert r.json()["error"]["type"] == "permission_error"
        r = httpx.get(f"{gateway.base_url}/v1/organization/{path}",
                      params={"start_time": traffic["start"]}, timeout=30)
        assert r.status_code == 401 and "error" in r.json()


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "start_time"),
        ({"start_time": "soon"}, "start_time"),
        ({"start_time": 1, "bucket_width": "1w"}, "bucket_width"),
        ({"start_time": 1, "limit": 0}, "limit"),
        ({"start_time": 1, "group_by": "colour"}, "group_by"),
        ({"start_time": 1, "page": "%%%"}, "page"),
        ({"start_time": 10**20}, "start_time"),
    ],
)
def test_bad_parameters_are_400s_naming_the_parameter(
    gateway: Any, params: dict[str, Any], param: str
) -> None:
    r = _get(gateway, "usage/completions", gateway.admin_key, **params)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_asking_for_usage_leaves_no_usage_row(gateway: Any, traffic: dict[str, int]) -> None:
    before = _settled(gateway)
    for path in ("usage/completions", "usage/embeddings", "costs"):
        _page(gateway, path, start_time=traffic["start"])
        _get(gateway, path, gateway.api_key, start_time=traffic["start"])
    assert _settled(gateway) == before
