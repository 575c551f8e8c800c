"""Admission on the real store: two guards (two replicas' worth) share one budget and one
key's rpm through PostgreSQL, never admit past them, and give back what they do not use."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from db.budgets import set_budget
from db.leases import budget_statuses
from gateway.domain.budgets import BudgetPeriod, BudgetScope
from gateway.domain.openai_errors import OpenAIError
from gateway.quota.guard import Admission, QuotaGuard, Who
from gateway.quota.syncer import PostgresQuotaStore, QuotaSyncer
from gateway.quota.worst_case import WorstCase

pytestmark = pytest.mark.usefixtures("clean_ledger")

D = Decimal
SHOP = Who("shop", None, "0b0e2c1e-0000-4000-8000-000000000001")
WORST = WorstCase(prompt_tokens=20, output_tokens=100, cost_usd=D("0.005"))


@pytest.fixture
async def replicas(ledger_engine: Engine) -> AsyncIterator[list[QuotaSyncer]]:
    syncers = []
    for name in ("a", "b"):
        guard = QuotaGuard(shared=True)
        syncer = QuotaSyncer(guard, PostgresQuotaStore(ledger_engine, f"test-{name}"))
        syncers.append(syncer)
    yield syncers
    for s in syncers:
        await s.stop()


async def _start(syncers: list[QuotaSyncer]) -> None:
    for s in syncers:
        await s.load_budgets()
        s.start()


async def _try(guard: QuotaGuard, who: Who = SHOP) -> Admission | OpenAIError:
    try:
        return await guard.admit(who, WORST)
    except OpenAIError as err:
        return err


def _budget(engine: Engine, usd: str) -> None:
    set_budget(engine, BudgetScope.APP, "shop", BudgetPeriod.DAY, D(usd), actor="test")


async def test_fifty_concurrent_requests_never_reserve_past_the_budget(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    _budget(ledger_engine, "0.02")
    await _start(replicas)
    results = await asyncio.gather(*(_try(replicas[i % 2].guard) for i in range(50)))
    admitted = [r for r in results if isinstance(r, Admission)]
    refused = [r for r in results if isinstance(r, OpenAIError)]
    assert len(admitted) == 4  # 4 x 0.005 = the whole 0.02: nothing settled yet
    assert {(e.status, e.type, e.code) for e in refused} == {
        (429, "insufficient_quota", "budget_exceeded")
    }
    assert "daily budget of $0.02 on app 'shop'" in refused[0].message
    assert refused[0].headers["x-costgate-budget-limit-usd"] == "0.02"
    assert refused[0].headers["x-costgate-budget-reset"].endswith("T00:00:00Z")


async def test_settled_and_released_requests_make_room_again(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    _budget(ledger_engine, "0.02")
    await _start(replicas)
    first = await asyncio.gather(*(_try(replicas[i % 2].guard) for i in range(8)))
    admitted = [r for r in first if isinstance(r, Admission)]
    assert len(admitted) == 4
    for i, a in enumerate(admitted):
        if i % 2:
            a.release()  # failed or cancelled before any upstream: nothing spent
        else:
            a.settle(D("0.001"), 50)
    for s in replicas:
        await s.round()
    # spent 0.002, nothing reserved but the slices: 0.018 left = 3 more worst cases
    second = await asyncio.gather(*(_try(replicas[i % 2].guard) for i in range(8)))
    assert len([r for r in second if isinstance(r, Admission)]) == 3
    (status,) = budget_statuses(ledger_engine)
    assert status.spent_usd == D("0.002")


async def test_a_raised_budget_readmits_after_the_next_syncs(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    _budget(ledger_engine, "0.005")
    await _start(replicas)
    assert isinstance(await _try(replicas[0].guard), Admission)
    assert isinstance(await _try(replicas[1].guard), OpenAIError)
    assert isinstance(await _try(replicas[1].guard), OpenAIError)  # refused locally now
    _budget(ledger_engine, "0.05")
    for s in replicas:
        await s.load_budgets()
        await s.round()
    assert isinstance(await _try(replicas[1].guard), Admission)


async def test_a_request_cancelled_while_it_waits_reserves_nothing(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    _budget(ledger_engine, "0.02")
    guard = replicas[0].guard
    await replicas[0].load_budgets()  # no syncer loop: the waiter waits for good
    waiter = asyncio.ensure_future(guard.admit(SHOP, WORST))
    await asyncio.sleep(0.05)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert all(s.in_use == 0 for s in guard.budget_slices.values())


async def test_unpriceable_requests_are_refused_under_a_hard_budget_only(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    unknown = WorstCase(prompt_tokens=20, output_tokens=None, cost_usd=None, why_unpriced="x")
    guard = replicas[0].guard
    await replicas[0].load_budgets()
    assert not guard.applies(SHOP)  # no budget: nothing to price
    _budget(ledger_engine, "1")
    await replicas[0].load_budgets()
    with pytest.raises(OpenAIError) as refused:
        await guard.admit(SHOP, unknown)
    assert refused.value.code == "budget_unpriceable"
    set_budget(
        ledger_engine, BudgetScope.APP, "shop", BudgetPeriod.DAY, D(1), actor="t", hard=False
    )
    await replicas[0].load_budgets()
    assert not guard.applies(SHOP)  # a soft budget alerts, never refuses


async def test_a_keys_rpm_holds_across_two_replicas(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    await _start(replicas)
    who = Who("shop", None, "0b0e2c1e-0000-4000-8000-000000000002", rpm=20)
    results = await asyncio.gather(*(_try(replicas[i % 2].guard, who) for i in range(40)))
    admitted = [r for r in results if isinstance(r, Admission)]
    refused = [r for r in results if isinstance(r, OpenAIError)]
    assert 19 <= len(admitted) <= 21
    assert {(e.status, e.code) for e in refused} == {(429, "rate_limit_exceeded")}
    headers = refused[0].headers
    assert headers["x-ratelimit-limit-requests"] == "20"
    assert int(headers["x-ratelimit-remaining-requests"]) <= 1
    assert headers["x-ratelimit-reset-requests"].endswith("s")
    assert int(headers["retry-after"]) >= 1


def test_budget_periods_of_the_store_and_the_guard_agree() -> None:
    guard = QuotaGuard(shared=True, now=lambda: dt.datetime(2026, 12, 1, 23, 59, tzinfo=dt.UTC))
    assert guard.hard_budgets(SHOP) == []


async def test_sequential_requests_never_reserve_past_the_budget_either(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    _budget(ledger_engine, "0.02")
    await _start(replicas)
    results = [await _try(replicas[i % 2].guard) for i in range(8)]
    assert [isinstance(r, Admission) for r in results].count(True) == 4
