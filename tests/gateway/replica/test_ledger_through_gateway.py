"""The ledger's promises, checked through the deployed gateway: every request has exactly
one row, priced as the price table says, through a database outage and a shutdown."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from db.keys import create_key

pytestmark = pytest.mark.ray

MESSAGES = [{"role": "user", "content": "Summarise the quarterly report in three bullets."}]
MODELS = ("gpt-4.1", "relay-gpt-4.1", "deepseek-v3.2", "relay-deepseek-v3.2", "auto", "code")


def _rows(gateway: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    engine = create_engine(gateway.database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT * FROM usage_records WHERE request_id = ANY(CAST(:ids AS uuid[]))"),
                {"ids": ids},
            ).mappings().all()
    finally:
        engine.dispose()
    return {str(r["request_id"]): dict(r) for r in rows}


def wait_rows(gateway: Any, ids: list[str], timeout: float = 60.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    rows: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        rows = _rows(gateway, ids)
        if len(rows) >= len(ids):
            return rows
        time.sleep(0.5)
    return rows


def expected_costs(cfg: Any, model_name: str, usage: dict[str, Any]) -> tuple[Decimal, Decimal]:
    """(list cost USD, actual cost USD) by hand from the config's price table."""
    model = cfg.model(model_name)
    provider = cfg.provider(model.provider)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
    mtok = Decimal(1_000_000)

    def cost(p: Any) -> Decimal:
        cached_rate = p.cached_input if p.cached_input is not None else p.input
        return ((prompt - cached) * p.input + cached * cached_rate + completion * p.output) / mtok

    list_usd = cost(model.list_prices)
    billing = provider.billing
    own = billing.price_table.get(model.upstream_model)
    billed = cost(own) if own is not None else cost(model.list_prices) * billing.multiplier
    q = Decimal("1e-10")
    return (
        list_usd.quantize(q, ROUND_HALF_EVEN),
        (billed / billing.fx_per_usd).quantize(q, ROUND_HALF_EVEN),
    )


async def _one(client: httpx.AsyncClient, key: str, model: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": MESSAGES, "max_tokens": 40}
    headers = {"authorization": f"Bearer {key}"}
    if not stream:
        r = await client.post("/v1/chat/completions", json=body, headers=headers)
        return {"status": r.status_code, "id": r.headers.get("x-costgate-request-id"),
                "model": r.headers.get("x-costgate-model"), "usage": r.json().get("usage")}
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    usage = None
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
        return {"status": r.status_code, "id": r.headers.get("x-costgate-request-id"),
                "model": r.headers.get("x-costgate-model"), "usage": usage}


def test_500_concurrent_requests_leave_500_rows_priced_by_the_table(gateway, sim):
    keys = [create_key(gateway.database_url, f"ledger-app-{i}", "ledger")[0] for i in range(3)]

    async def run() -> list[dict[str, Any]]:
        limits = httpx.Limits(max_connections=500, max_keepalive_connections=500)
        async with httpx.AsyncClient(base_url=gateway.base_url, timeout=120,
                                     limits=limits) as client:
            return await asyncio.gather(*(
                _one(client, keys[i % 3], MODELS[i % len(MODELS)], stream=i % 2 == 1)
                for i in range(500)
            ))

    results = asyncio.run(run())
    assert [r["status"] for r in results] == [200] * 500
    ids = [r["id"] for r in results]
    assert len(set(ids)) == 500
    rows = wait_rows(gateway, ids)
    assert len(rows) == 500
    for result in results:
        row = rows[result["id"]]
        usage = result["usage"]
        assert row["model"] == result["model"]
        assert row["app"].startswith("ledger-app-") and row["team"] == "ledger"
        assert row["usage_source"] == "provider"
        assert row["prompt_tokens"] == usage["prompt_tokens"]
        assert row["completion_tokens"] == usage["completion_tokens"]
        list_usd, actual_usd = expected_costs(gateway.cfg, row["model"], usage)
        assert row["list_cost_usd"] == list_usd, row
        assert row["actual_cost_usd"] == actual_usd, row


def _load(gateway: Any, seconds: float, results: list[dict[str, Any]], concurrency: int) -> None:
    """Bounded load from a thread: at most `seconds`, at most 5,000 requests."""

    async def worker(client: httpx.AsyncClient, deadline: float, n: int) -> None:
        i = 0
        while time.monotonic() < deadline and len(results) < 5000:
            i += 1
            try:
                results.append(await _one(client, gateway.api_key,
                                          MODELS[(n + i) % len(MODELS)], stream=(n + i) % 3 == 0))
            except httpx.HTTPError as err:  # a gateway going down: counted, not raised
                results.append({"status": 0, "id": None, "error": type(err).__name__})

    async def run() -> None:
        deadline = time.monotonic() + seconds
        async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60) as client:
            await asyncio.gather(*(worker(client, deadline, n) for n in range(concurrency)))

    asyncio.run(run())


def test_database_outage_of_30_s_loses_no_row_and_fails_no_request(gateway, sim):
    results: list[dict[str, Any]] = []
    load = threading.Thread(target=_load, args=(gateway, 42.0, results, 6))
    load.start()
    time.sleep(3)
    gateway.db_proxy.block()
    blocked_at = len(results)
    time.sleep(32)
    during = len(results) - blocked_at
    gateway.db_proxy.unblock()
    load.join(60)
    assert not load.is_alive()
    assert during > 50  # requests kept flowing while the database was away
    assert all(r["status"] == 200 for r in results), [r for r in results if r["status"] != 200]
    ids = [r["id"] for r in results]
    rows = wait_rows(gateway, ids, timeout=90)
    assert set(rows) == set(ids)
    engine = create_engine(gateway.database_url)
    with engine.connect() as conn:
        dupes = conn.execute(text(
            "SELECT count(*) - count(DISTINCT request_id) FROM usage_records")).scalar()
    engine.dispose()
    assert dupes == 0


def test_costgate_down_during_load_keeps_every_completed_requests_row(gateway, sim):
    results: list[dict[str, Any]] = []
    load = threading.Thread(target=_load, args=(gateway, 12.0, results, 6))
    load.start()
    time.sleep(4)
    down = gateway.run_cli("down")
    assert down.returncode == 0, down.stderr
    load.join(60)
    try:
        completed = [r["id"] for r in results if r["status"] == 200 and r["id"]]
        assert len(completed) > 20
        rows = wait_rows(gateway, completed, timeout=10)
        assert set(completed) <= set(rows), set(completed) - set(rows)
    finally:
        # the rest of the session needs its gateway back
        up = gateway.run_cli("up")
        assert up.returncode == 0, up.stderr


def test_request_ids_are_uuids(gateway, sim):
    r = httpx.post(gateway.base_url + "/v1/chat/completions",
                   headers={"authorization": f"Bearer {gateway.api_key}"},
                   json={"model": "fast", "messages": MESSAGES})
    uuid.UUID(r.headers["x-costgate-request-id"])
