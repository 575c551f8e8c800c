"""The acceptance of each-user budgets on the real 2-replica Ray Serve gateway (`costgate
up`, the sim upstream, its own PostgreSQL ledger): two end users of one app, 40 parallel
requests each, under a budget of $0.01 a day on each end user. Each is refused past their
own limit, neither's spend touches the other's, and the ledger shows each at most the
limit plus one worst case."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
from sqlalchemy import text

from db.engine import make_engine
from db.keys import create_key
from tests.fixtures.gateway import RunningGateway

MODEL = "gpt-4o"  # $2.50 in, $10 out per 1M tokens
MAX_TOKENS = 100
BODY = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": "hi"}]}
# prompt bound (3 + 3 + 1 tokens, x1.1 + 16 = 24) at $2.50 + 100 at $10, per 1M: ~$0.00106
WORST = (Decimal(24) * Decimal("2.5") + MAX_TOKENS * Decimal(10)) / Decimal(1_000_000)
LIMIT = Decimal("0.01")


def _cli(gw: RunningGateway, *args: str) -> str:
    done = gw.run_cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _query(gw: RunningGateway, sql: str, **params: Any) -> list[Any]:
    engine = make_engine(gw.database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql), params).all())
    finally:
        engine.dispose()


def _wait(what: str, done: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


async def _burst(
    gw: RunningGateway, key: str, n: int, *, header_user: str | None, body_user: str | None
) -> list[httpx.Response]:
    headers = {"authorization": f"Bearer {key}"}
    if header_user is not None:
        headers["x-costgate-user"] = header_user
    body = BODY if body_user is None else BODY | {"user": body_user}
    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=60, limits=limits) as client:
        return await asyncio.gather(
            *(client.post("/v1/chat/completions", json=body, headers=headers) for _ in range(n))
        )


def _codes(responses: list[httpx.Response]) -> list[str]:
    return [
        "ok" if r.status_code == 200 else f"{r.status_code}:{r.json()['error']['code']}"
        for r in responses
    ]


async def test_each_end_user_is_refused_past_their_own_budget_and_only_theirs(
    gateway: RunningGateway, sim: Any
) -> None:
    sim.set_behaviour(MODEL, completion_tokens=[80, 100], per_token_ms=0.2)
    app = f"each-user-{uuid.uuid4().hex[:8]}"
    key, _ = create_key(gateway.database_url, app)
    alice, bob, probe = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("alice", "bob", "probe"))
    _cli(gateway, "budgets", "set", "--app", app, "--each-user", "--usd", "0.01", "--period",
         "day")  # fmt: skip
    try:
        # the budget is in force on both replicas once each holds a lease for the probe
        # end user (its requests spend only the probe's own budget)
        probes = 0

        def both_replicas_hold() -> bool:
            nonlocal probes
            codes = _codes(asyncio.run(_burst(gateway, key, 4, header_user=probe, body_user=None)))
            probes += 4
            assert set(codes) <= {"ok", "429:budget_exceeded"}, codes
            holders = _query(
                gateway,
                "SELECT count(DISTINCT l.holder) FROM budget_leases l JOIN budgets b"
                " ON b.id = l.budget_id WHERE b.scope = 'each_user' AND b.scope_value = :app",
                app=app,
            )
            return int(holders[0][0]) >= 2

        await asyncio.to_thread(_wait, "both replicas to enforce the budget", both_replicas_hold)

        first = await _burst(gateway, key, 40, header_user=alice, body_user=None)
        codes = _codes(first)
        assert set(codes) == {"ok", "429:budget_exceeded"}, codes
        admitted_alice = codes.count("ok")
        # the second end user still gets answers after the first is refused
        second = await _burst(gateway, key, 40, header_user=None, body_user=bob)
        codes_bob = _codes(second)
        assert set(codes_bob) == {"ok", "429:budget_exceeded"}, codes_bob
        admitted_bob = codes_bob.count("ok")
        # about $0.01 / $0.001 each: the other's spend took nothing of either's
        assert admitted_alice >= 5 and admitted_bob >= 5, (admitted_alice, admitted_bob)

        refusal = next(r for r in second if r.status_code == 429)
        error = refusal.json()["error"]
        assert error["type"] == "insufficient_quota"
        assert f"daily budget of $0.01 on each end user of app '{app}'" in error["message"]
        assert alice not in error["message"] and bob not in error["message"]
        assert refusal.headers["x-costgate-budget-limit-usd"] == "0.01"
        assert Decimal(refusal.headers["x-costgate-budget-remaining-usd"]) < WORST
        assert refusal.headers["x-should-retry"] == "false"

        # the ledger, once it has every row: each end user at most the limit + one worst case
        total = 80 + probes

        def flushed() -> bool:
            got = _query(gateway, "SELECT count(*) FROM usage_records WHERE app = :a", a=app)
            return int(got[0][0]) >= total

        await asyncio.to_thread(_wait, "the ledger to flush", flushed)
        per_user = {
            row[0]: (Decimal(row[1]), int(row[2]), int(row[3]))
            for row in _query(
                gateway,
                "SELECT end_user, coalesce(sum(actual_cost_usd), 0), count(*),"
                " count(*) FILTER (WHERE status = 'ok') FROM usage_records WHERE app = :a"
                " GROUP BY end_user",
                a=app,
            )
        }
        assert set(per_user) == {alice, bob, probe}  # stored plain: no hashing configured
        # (the probe's first requests ran before the replicas had loaded the budget: its
        # spend is not bounded by it, only the users' sent once it was in force)
        for end_user in (alice, bob):
            assert per_user[end_user][0] <= LIMIT + WORST, (end_user, per_user[end_user])
        assert per_user[alice][1:] == (40, admitted_alice)
        assert per_user[bob][1:] == (40, admitted_bob)
        print(f"admitted: {admitted_alice} and {admitted_bob} of 40 each; spent {per_user}")

        status = _cli(gateway, "budgets", "status", "--app", app, "--each-user")
        # each end user's spend as the ledger has it (from the user rollup); whether a user
        # reached the limit exactly depends on the last worst case that still fitted
        assert "end users who spent: 3; at or over the limit: " in status
        for end_user in (alice, bob, probe):
            spent = per_user[end_user][0].quantize(Decimal("0.000001")).normalize()
            assert f"${format(spent, 'f')}  {end_user}" in status, (end_user, status)
    finally:
        _cli(gateway, "budgets", "remove", "--app", app, "--each-user")
