"""OpenAI's Files and Batch APIs through the deployed gateway (Ray Serve, 2 replicas,
PostgreSQL) against the sim, with the openai SDK's own calls: a batch's answers, its
ledger rows at the batch price, the waterfall's batch discount, and its refusals."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import text

from dashboard import queries
from dashboard.filters import Filters
from dashboard.spend import breakdown, savings_split
from db.batches.store import OPEN_STATUSES
from db.engine import make_engine
from db.keys import create_key
from gateway.finance.savings import to_cents
from tests.fixtures.gateway import RunningGateway

pytestmark = pytest.mark.ray
MODEL = "gpt-4o-mini"
DEAR = "gpt-4.1"  # $8 per 1M output tokens at list


def _client(gw: RunningGateway, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


def _jsonl(n: int, model: str = MODEL, max_tokens: int = 64) -> bytes:
    return "".join(
        json.dumps({"custom_id": f"q-{i}", "method": "POST", "url": "/v1/chat/completions",
                    "body": {"model": model, "max_tokens": max_tokens,
                             "messages": [{"role": "user", "content": f"Question {i}?"}]}})
        + "\n" for i in range(n)
    ).encode()


def _app(gw: RunningGateway, **scope: Any) -> tuple[str, str]:
    app = f"batch-{uuid.uuid4().hex[:8]}"
    key, _ = create_key(gw.database_url, app, **scope)
    wait_for_key(gw, key)
    return app, key


def wait_for_key(gw: RunningGateway, key: str, timeout_s: float = 15) -> None:
    """Until both replicas know a new key: a replica reloads keys on a miss at most every
    2 s, so a key made right after another may wait for the periodic refresh."""
    deadline, known = time.monotonic() + timeout_s, 0
    while known < 4 and time.monotonic() < deadline:
        r = httpx.get(gw.base_url + "/v1/models", headers={"authorization": f"Bearer {key}"},
                      timeout=10)
        known = known + 1 if r.status_code == 200 else 0
    assert known == 4, "the new key was not loaded in time"


def _until_ended(client: openai.OpenAI, batch_id: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status not in OPEN_STATUSES:
            return batch
        time.sleep(0.3)
    raise AssertionError(f"batch {batch_id} still {batch.status} after {timeout_s} s")


def _sim_batches(sim: Any) -> dict[str, Any]:
    return dict(httpx.get(sim.base_url + "/_sim/batches", timeout=10).json())


def _rows(gw: RunningGateway, batch_id: str) -> list[Any]:
    engine = make_engine(gw.database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(
                "SELECT r.*, l.custom_id FROM usage_records r JOIN batch_lines l "
                "USING (request_id) WHERE l.batch_id = :b ORDER BY l.custom_id"),
                {"b": batch_id}))
    finally:
        engine.dispose()


def test_the_openai_sdk_batch_flow_bills_each_line_at_the_batch_price(
    gateway: RunningGateway, sim: Any
) -> None:
    # long answers from a dear model, so that the discount is dollars, not fractions of a cent
    sim.set_behaviour(DEAR, completion_tokens=[4000, 4000])
    app, key = _app(gateway)
    client = _client(gateway, key)
    data = _jsonl(5, model=DEAR, max_tokens=5000)
    uploaded = client.files.create(file=("questions.jsonl", data), purpose="batch")
    assert client.files.retrieve(uploaded.id).bytes == len(data)
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                  completion_window="24h")
    assert batch.status == "in_progress" and batch.request_counts.total == 5
    ended = _until_ended(client, batch.id)
    assert ended.status == "completed", ended
    assert (ended.request_counts.completed, ended.request_counts.failed) == (5, 0)
    assert ended.output_file_id is not None
    output = [json.loads(x) for x in client.files.content(ended.output_file_id).text.splitlines()]
    assert sorted(o["custom_id"] for o in output) == [f"q-{i}" for i in range(5)]
    for o in output:
        body = o["response"]["body"]
        assert o["response"]["status_code"] == 200
        assert body["model"] == DEAR and body["choices"][0]["message"]["content"]

    rows = _rows(gateway, batch.id)
    assert [r.custom_id for r in rows] == [f"q-{i}" for i in range(5)]
    assert len({r.request_id for r in rows}) == 5
    for r in rows:
        assert (r.endpoint, r.app, r.status, r.usage_source) == ("batch", app, "ok", "provider")
        # openai's batch rate: half the live price of the same tokens, exactly
        assert r.actual_cost_usd == (r.list_cost_usd / 2).quantize(Decimal("1E-10"))
        assert r.actual_cost_usd > 0
    billed = sum((r.actual_cost_usd for r in rows), Decimal(0))
    listed = sum((r.list_cost_usd for r in rows), Decimal(0))
    engine = make_engine(gateway.database_url)
    with engine.connect() as conn:
        cost = conn.execute(text("SELECT billed_usd FROM batches WHERE id = :b"),
                            {"b": batch.id}).scalar_one()
    engine.dispose()
    assert billed == cost
    print(f"batch of 5: billed {billed} USD, list {listed} USD")

    today = dt.datetime.now(dt.UTC).date()
    cube = queries.cube(gateway.database_url, Filters(start=today, end=today, apps=(app,)),
                        dims=queries.SAVINGS_DIMS)
    steps = savings_split(cube).in_cents().steps
    # Spend by endpoint: the batch lines are the endpoint `batch`, at what they billed
    by_endpoint = breakdown(cube, "endpoint").set_index("endpoint")
    assert by_endpoint.loc["batch", "spend_usd"] == billed
    assert by_endpoint.loc["batch", "requests"] == 5
    assert steps["batch_discount"] == to_cents(listed - billed)
    assert steps["batch_discount"] >= Decimal("0.08")  # 20,000 output tokens at $4/M saved
    print(f"waterfall batch discount {steps['batch_discount']} USD")

    # OpenAI's usage API, grouped by `batch`: the five lines apart from live requests
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    start = int(time.time()) // 86400 * 86400
    page = httpx.get(gateway.base_url + "/v1/organization/usage/completions", timeout=30,
                     params={"start_time": start, "group_by": "batch", "project_ids": app},
                     headers={"authorization": f"Bearer {gateway.admin_key}"}).json()
    results = {r["batch"]: r["num_model_requests"] for b in page["data"] for r in b["results"]}
    assert results[True] == 5


def test_a_line_for_a_model_outside_the_keys_scope_is_refused_naming_the_line(
    gateway: RunningGateway, sim: Any
) -> None:
    _, key = _app(gateway, allowed_models=[MODEL])
    client = _client(gateway, key)
    lines = _jsonl(2) + _jsonl(1, model="gpt-4.1").replace(b"q-0", b"q-other")
    uploaded = client.files.create(file=("mixed.jsonl", lines), purpose="batch")
    with pytest.raises(openai.BadRequestError) as refused:
        client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                              completion_window="24h")
    message = refused.value.body["message"]
    assert "line 3" in message and "q-other" in message and "gpt-4.1" in message
    assert _sim_batches(sim)["batches_created"] == 0


def test_a_batch_over_budget_is_refused_before_anything_goes_upstream(
    gateway: RunningGateway, sim: Any
) -> None:
    app, key = _app(gateway)
    done = gateway.run_cli("budgets", "set", "--app", app, "--usd", "0.0001", "--period", "day")
    assert done.returncode == 0, done.stderr
    client = _client(gateway, key)
    # the replicas know the budget once a live request over it is refused on each of them
    big = {"model": MODEL, "max_tokens": 5000, "messages": [{"role": "user", "content": "x"}]}
    refusals = 0
    deadline = time.monotonic() + 30
    while refusals < 6 and time.monotonic() < deadline:
        r = httpx.post(gateway.base_url + "/v1/chat/completions", json=big, timeout=30,
                       headers={"authorization": f"Bearer {key}"})
        refusals = refusals + 1 if r.status_code == 429 else 0
    assert refusals == 6
    sim.reset()
    uploaded = client.files.create(file=("big.jsonl", _jsonl(3, max_tokens=4000)),
                                   purpose="batch")
    with pytest.raises(openai.RateLimitError) as refused:
        client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                              completion_window="24h")
    assert refused.value.body["code"] == "budget_exceeded"
    seen = _sim_batches(sim)
    assert (seen["files_uploaded"], seen["batches_created"]) == (0, 0)


def test_another_apps_key_gets_a_404_for_the_file_and_the_batch(
    gateway: RunningGateway, sim: Any
) -> None:
    _, key_a = _app(gateway)
    _, key_b = _app(gateway)
    a, b = _client(gateway, key_a), _client(gateway, key_b)
    uploaded = a.files.create(file=("mine.jsonl", _jsonl(1)), purpose="batch")
    batch = a.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                             completion_window="24h")
    for call in (lambda: b.files.retrieve(uploaded.id), lambda: b.files.content(uploaded.id),
                 lambda: b.files.delete(uploaded.id), lambda: b.batches.retrieve(batch.id),
                 lambda: b.batches.cancel(batch.id),
                 lambda: b.batches.create(input_file_id=uploaded.id,
                                          endpoint="/v1/chat/completions",
                                          completion_window="24h")):
        with pytest.raises(openai.NotFoundError):
            call()
    assert [x.id for x in b.batches.list()] == []
    assert [x.id for x in a.batches.list()] == [batch.id]
    ended = _until_ended(a, batch.id)
    assert ended.output_file_id is not None
    with pytest.raises(openai.NotFoundError):
        b.files.content(ended.output_file_id)


def test_a_cancelled_batch_ends_cancelled_with_a_row_per_line_and_no_bill(
    gateway: RunningGateway, sim: Any
) -> None:
    # the sim would take 30 s: the cancellation arrives first
    httpx.put(sim.base_url + "/_sim/batches", json={"delay_s": 30}, timeout=10)
    _, key = _app(gateway)
    client = _client(gateway, key)
    uploaded = client.files.create(file=("slow.jsonl", _jsonl(3)), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                  completion_window="24h")
    assert client.batches.cancel(batch.id).status in ("cancelling", "cancelled")
    ended = _until_ended(client, batch.id)
    assert ended.status == "cancelled" and ended.request_counts.failed == 3
    rows = _rows(gateway, batch.id)
    assert [(r.status, r.actual_cost_usd) for r in rows] == [("upstream_error", None)] * 3
