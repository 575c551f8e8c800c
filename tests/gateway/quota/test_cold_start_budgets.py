"""Budgets at a cold start while PostgreSQL is down (a real PostgreSQL behind a proxy that
the test cuts; the request path's real GatewayService and app, the upstream an
`httpx.MockTransport`): never an admission without a limit. A replica that loaded the
budgets once left them on disk; one that starts during the outage serves callers under
no hard budget from that set and answers a budgeted caller 503 `budgets_unavailable`;
with no set on disk either, every request is a 503."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from db.budgets import remove_budget, set_budget
from db.engine import make_engine
from gateway.domain.budgets import BudgetPeriod, BudgetScope
from gateway.quota.budget_cache import BUDGET_CACHE_FILE, BudgetCache
from gateway.quota.syncer import PostgresQuotaStore, QuotaSyncer
from gateway.replica.auth import Caller
from tests.fixtures.database import DatabaseProxy
from tests.gateway.replica.test_service import APP, APP_KEY, SECRET, Harness, completion

CAPPED_KEY = "cg-unit-capped"
BODY = {"model": "gpt-4.1", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def capped(ledger_engine: Engine) -> Iterator[Caller]:
    app = f"capped-{uuid.uuid4().hex[:8]}"
    set_budget(ledger_engine, BudgetScope.APP, app, BudgetPeriod.DAY, Decimal(5), actor="test")
    yield Caller(app=app, team=None, key_id=uuid.uuid4())
    remove_budget(ledger_engine, BudgetScope.APP, app, actor="test")


@pytest.fixture
async def start_replica(
    monkeypatch: pytest.MonkeyPatch, database_proxy: DatabaseProxy, capped: Caller
) -> AsyncIterator[Callable[[Path], asyncio.Future[tuple[Harness, QuotaSyncer]]]]:
    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY",
                "RELAY_API_KEY"):
        monkeypatch.setenv(env, SECRET)
    made: list[tuple[Harness, QuotaSyncer, Engine]] = []

    async def start(state: Path) -> tuple[Harness, QuotaSyncer]:
        """One replica as the ingress starts one: budgets loaded (or not), syncer on."""
        h = Harness(lambda _: httpx.Response(200, json=completion()),
                    keys={APP_KEY: APP, CAPPED_KEY: capped}, key=None)
        engine = make_engine(database_proxy.url, pool_size=1, max_overflow=0,
                             connect_args={"connect_timeout": 2})
        store = PostgresQuotaStore(engine, f"test-{uuid.uuid4().hex[:6]}")
        syncer = h.service.use_quota_store(store, BudgetCache(state / BUDGET_CACHE_FILE))
        with contextlib.suppress(Exception):  # the outage the test made
            await syncer.load_budgets()
        syncer.start()
        made.append((h, syncer, engine))
        return h, syncer

    yield start  # type: ignore[misc]
    for h, _, engine in made:
        await h.aclose()
        engine.dispose()


async def _ask(h: Harness, key: str) -> httpx.Response:
    return await h.chat(BODY, authorization=f"Bearer {key}")


async def test_a_cold_start_during_an_outage_enforces_the_budgets_known_on_disk(
    start_replica, database_proxy: DatabaseProxy, tmp_path: Path
) -> None:
    warm, _ = await start_replica(tmp_path)  # PostgreSQL up: the set goes to disk
    assert (tmp_path / BUDGET_CACHE_FILE).exists()
    assert (await _ask(warm, CAPPED_KEY)).status_code == 200
    database_proxy.block()
    cold, _ = await start_replica(tmp_path)
    assert cold.service.quota.loaded  # from the file
    free = await _ask(cold, APP_KEY)
    assert free.status_code == 200  # under no budget: served
    refused = await _ask(cold, CAPPED_KEY)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "budgets_unavailable"
    assert refused.headers["retry-after"]
    assert [r.http_status for r in cold.records] == [200, 503]
    assert cold.records[1].actual_cost_usd is None and cold.records[1].attempts == 0


async def test_a_cold_start_during_an_outage_without_a_known_set_admits_nobody(
    start_replica, database_proxy: DatabaseProxy, tmp_path: Path
) -> None:
    database_proxy.block()
    cold, _ = await start_replica(tmp_path / "empty")
    assert not cold.service.quota.loaded
    for key in (APP_KEY, CAPPED_KEY):
        r = await _ask(cold, key)
        assert r.status_code == 503 and r.json()["error"]["code"] == "budgets_unavailable"
    assert cold.seen == []  # nothing went upstream
    database_proxy.unblock()  # the store is back: the next reload lets requests in
    for _ in range(100):
        if cold.service.quota.loaded:
            break
        await asyncio.sleep(0.1)
    assert (await _ask(cold, APP_KEY)).status_code == 200
