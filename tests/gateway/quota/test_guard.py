"""Admission on the real store: two guards (two replicas' worth) share one budget and one
key's rpm through PostgreSQL, never admit past them, and give back what they do not use."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from sqlalchemy import Engine, text

from db.budgets import set_budget
from db.leases import budget_statuses
from gateway.domain.budgets import Budget, BudgetPeriod, BudgetScope
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


async def test_a_keys_rpm_admits_its_whole_minute_to_requests_that_trickle_in(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    # as over HTTP: requests arrive while rounds run, so every round ends with a new one
    # already asked for; the units a round brought its waiters are theirs, not given back
    # by the next round before they could take them
    await _start(replicas)
    who = Who("shop", None, "0b0e2c1e-0000-4000-8000-000000000003", rpm=20)

    async def one(i: int) -> Admission | OpenAIError:
        await asyncio.sleep(i * 0.002)
        return await _try(replicas[i % 2].guard, who)

    results = await asyncio.gather(*(one(i) for i in range(40)))
    admitted = [r for r in results if isinstance(r, Admission)]
    assert 19 <= len(admitted) <= 21, len(admitted)


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


# -- end users and tags -------------------------------------------------------------------

ALICE = Who("shop", None, SHOP.key_id, end_user="alice", tags={"feature": "search"})
BOB = Who("shop", None, SHOP.key_id, end_user="bob")


def test_each_user_and_tag_budgets_apply_only_to_whom_they_name() -> None:
    guard = QuotaGuard(shared=True)
    each = Budget(1, BudgetScope.EACH_USER, "shop", BudgetPeriod.DAY, D("0.5"), True)
    tag = Budget(2, BudgetScope.TAG, "feature = search", BudgetPeriod.DAY, D(5), True)
    other_app = Budget(3, BudgetScope.EACH_USER, "blog", BudgetPeriod.DAY, D(1), True)
    soft = Budget(4, BudgetScope.TAG, "env=prod", BudgetPeriod.DAY, D(1), False)
    guard.replace_budgets([each, tag, other_app, soft])
    assert guard.hard_budgets(ALICE) == [each, tag]
    assert guard.hard_budgets(BOB) == [each]
    # no end user named: under no each-user budget; another tag value: not under the tag's
    anonymous = Who("shop", None, None, tags={"feature": "chat", "env": "prod"})
    assert guard.hard_budgets(anonymous) == [] and not guard.applies(anonymous)
    assert guard.applies(Who("blog", None, None, user_rpm=5)) is False  # no end user
    assert guard.applies(Who("blog", None, None, end_user="x", user_rpm=5))


async def test_each_end_user_has_the_whole_limit_to_themselves_across_replicas(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    set_budget(ledger_engine, BudgetScope.EACH_USER, "shop", BudgetPeriod.DAY, D("0.02"),
               actor="test")  # fmt: skip
    await _start(replicas)
    calls = [_try(replicas[i % 2].guard, ALICE if i < 20 else BOB) for i in range(40)]
    results = await asyncio.gather(*calls)
    alice, bob = results[:20], results[20:]
    # 4 x 0.005 each: neither's reservations took anything of the other's
    assert [isinstance(r, Admission) for r in alice].count(True) == 4
    assert [isinstance(r, Admission) for r in bob].count(True) == 4
    refused = next(r for r in bob if isinstance(r, OpenAIError))
    assert (refused.status, refused.code) == (429, "budget_exceeded")
    assert "daily budget of $0.02 on each end user of app 'shop'" in refused.message
    assert "alice" not in refused.message and "bob" not in refused.message
    assert Decimal(refused.headers["x-costgate-budget-remaining-usd"]) < WORST.cost_usd  # type: ignore[operator]
    subjects = {s.subject for g in replicas for s in g.guard.budget_slices.values()}
    assert subjects == {"alice", "bob"}


async def test_a_tag_budget_counts_every_app_carrying_the_tag(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    set_budget(ledger_engine, BudgetScope.TAG, "feature=search", BudgetPeriod.DAY, D("0.01"),
               actor="test")  # fmt: skip
    await _start(replicas)
    blog = Who("blog", None, None, tags={"feature": "search", "env": "prod"})
    results = [await _try(replicas[i % 2].guard, ALICE if i % 2 else blog) for i in range(5)]
    assert [isinstance(r, Admission) for r in results].count(True) == 2  # 2 x 0.005, shared
    untagged = Who("blog", None, None, tags={"feature": "chat"})
    assert isinstance(await _try(replicas[0].guard, untagged), Admission)  # nothing applies


async def test_an_end_users_rpm_holds_across_replicas_and_spares_the_others(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    await _start(replicas)
    limited = [dataclasses.replace(w, user_rpm=5) for w in (ALICE, BOB)]
    results = await asyncio.gather(
        *(_try(replicas[i % 2].guard, limited[i // 12]) for i in range(24))
    )
    for part in (results[:12], results[12:]):
        assert 4 <= [isinstance(r, Admission) for r in part].count(True) <= 6
    refused = next(r for r in results if isinstance(r, OpenAIError))
    assert (refused.status, refused.code) == (429, "rate_limit_exceeded")
    assert "Rate limit reached for this end user: 5 requests per minute" in refused.message
    assert refused.headers["x-ratelimit-limit-requests"] == "5"
    names = set(replicas[0].guard.user_buckets) | set(replicas[1].guard.user_buckets)
    assert names == {f"key:{SHOP.key_id}:user:{u}:rpm" for u in ("alice", "bob")}


async def test_idle_end_users_are_dropped_so_memory_follows_who_is_active(
    ledger_engine: Engine, replicas: list[QuotaSyncer]
) -> None:
    set_budget(ledger_engine, BudgetScope.EACH_USER, "shop", BudgetPeriod.DAY, D(1),
               actor="test")  # fmt: skip
    syncer = replicas[0]
    await syncer.load_budgets()
    syncer.start()
    users = [dataclasses.replace(BOB, end_user=f"user-{i}") for i in range(30)]
    admitted = await asyncio.gather(*(syncer.guard.admit(u, WORST) for u in users))
    assert len(syncer.guard.budget_slices) == 30
    for a in admitted:
        a.settle(D("0.001"), 50)
    # a few quiet syncs hand each slice back whole; then it is dropped
    deadline = time.monotonic() + 20
    while syncer.guard.budget_slices and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert syncer.guard.budget_slices == {}
    # what they spent was reported before their slices went: a new request sees it
    with ledger_engine.connect() as conn:
        settled = conn.execute(
            text("SELECT sum(settled_usd), count(DISTINCT subject) FROM budget_leases")
        ).one()
    assert settled == (D("0.030"), 30)


def test_a_local_end_user_bucket_is_dropped_once_full_again() -> None:
    now = [0.0]
    guard = QuotaGuard(shared=False, clock=lambda: now[0])
    who = dataclasses.replace(BOB, user_rpm=2, user_tpm=1000)
    asyncio.run(guard.admit(who, WORST))
    guard.prune()
    assert len(guard.user_buckets) == 2  # in use: kept
    now[0] = 60.0  # refilled
    guard.prune()
    assert guard.user_buckets == {}
