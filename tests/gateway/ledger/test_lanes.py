"""The writer's connections side by side: two batches really are in flight at once
against a real PostgreSQL, their rollups add up exactly, and a lane that fails gives its
rows back without a new batch starting after it (the drain's logic, with a fake write)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

import pytest
from sqlalchemy import Engine, text

from gateway.domain.usage_record import UsageRecord
from gateway.ledger.database import LedgerDatabase, TransientDbError
from gateway.ledger.lanes import Lanes
from gateway.ledger.writer import RecordWriter
from tests.gateway.ledger.support import make_record, row_count, wait_until

pytestmark = pytest.mark.usefixtures("clean_ledger")


def _writers_waiting_on_a_lock(engine: Engine) -> int:
    with engine.connect() as conn:
        q = text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'costgate-record-writer' AND wait_event_type = 'Lock'"
        )
        return int(conn.execute(q).scalar_one())


async def test_two_batches_are_in_flight_at_once_and_the_rollups_stay_exact(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url, batch_size=50, max_batch=50, connections=2)
    await w.start()
    # the end users' rollup held by another transaction: each batch's fold waits on it
    with ledger_engine.connect() as blocker:
        blocker.execute(text("LOCK TABLE usage_rollup_user_daily IN EXCLUSIVE MODE"))
        for i in range(200):
            w.submit(make_record(end_user=f"user-{i % 7}", app=("a", "b")[i % 2]))
        await wait_until(lambda: _writers_waiting_on_a_lock(ledger_engine) == 2)
        assert row_count(ledger_engine) == 0
        blocker.rollback()
    await wait_until(lambda: w.stats()["written"] == 200)
    assert row_count(ledger_engine) == 200
    with ledger_engine.connect() as conn:
        for table in ("usage_rollup_daily", "usage_rollup_hourly", "usage_rollup_user_daily"):
            assert conn.execute(text(f"SELECT sum(requests) FROM {table}")).scalar_one() == 200
        per_user = conn.execute(
            text("SELECT end_user, sum(requests) FROM usage_rollup_user_daily GROUP BY 1")
        ).all()
    assert sorted(n for _, n in per_user) == sorted(
        sum(1 for i in range(200) if i % 7 == u) for u in range(7)
    )


def _lanes(count: int) -> Lanes:
    # never connected: the drain only hands them to the write it is given
    return Lanes(lambda: LedgerDatabase("postgresql://x@127.0.0.1:1/x", write_timeout_s=1,
                                        connect_timeout_s=1), count)  # fmt: skip


async def test_a_failed_lane_gives_its_rows_back_and_no_batch_starts_after_it() -> None:
    lanes = _lanes(2)
    buffer = collections.deque(make_record() for _ in range(30))
    first_rows = list(buffer)[:10]
    started: list[int] = []
    second_may_end = asyncio.Event()
    accepted: list[int] = []

    async def write(db: LedgerDatabase, batch: list[UsageRecord]) -> int:
        started.append(len(batch))
        if len(started) == 1:
            await asyncio.sleep(0)
            raise TransientDbError  # the first batch fails while the second is in flight
        await second_may_end.wait()
        return len(batch)

    async def release() -> None:
        await asyncio.sleep(0.05)
        second_may_end.set()

    releaser = asyncio.create_task(release())
    ok = await lanes.drain(
        buffer, write, accepted.append, max_batch=10, min_batch=5, wake=asyncio.Event()
    )
    await releaser
    assert not ok
    assert started == [10, 10]  # both lanes took a batch; none started after the failure
    assert accepted == [10]  # the second lane's batch committed and is counted
    assert list(buffer)[:10] == first_rows and len(buffer) == 20
    assert lanes.held() == 0


async def test_a_second_lane_waits_for_a_batch_worth_a_transaction() -> None:
    lanes = _lanes(2)
    buffer = collections.deque(make_record() for _ in range(3))
    wake, sizes = asyncio.Event(), []
    first_may_end = asyncio.Event()

    async def write(db: LedgerDatabase, batch: list[UsageRecord]) -> int:
        sizes.append(len(batch))
        if len(sizes) == 1:
            await first_may_end.wait()
        return len(batch)

    async def feed() -> None:
        await asyncio.sleep(0.02)
        buffer.extend(make_record() for _ in range(2))  # below min_batch: no second lane
        await asyncio.sleep(0.02)
        assert sizes == [3]
        buffer.extend(make_record() for _ in range(4))
        wake.set()  # as submit() does at batch_size
        await asyncio.sleep(0.02)
        assert sizes == [3, 6]  # taken while the first lane was still busy
        first_may_end.set()

    feeder = asyncio.create_task(feed())
    accepted: list[int] = []
    assert await lanes.drain(buffer, write, accepted.append, max_batch=50, min_batch=5, wake=wake)
    await feeder
    assert sorted(accepted) == [3, 6] and not buffer
