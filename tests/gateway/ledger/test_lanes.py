"""The writer's connections side by side: two batches really are in flight at once
against a real PostgreSQL, their rollups add up exactly, and a lane that fails gives its
rows back without a new batch starting after it (the drain's logic, with a fake write).
A busy lane's next batch is taken and its COPY data made while the lane writes, and
that data is what reaches the table, exactly."""

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

    async def write(db: LedgerDatabase, batch: list[UsageRecord], _: list[bytes] | None) -> int:
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

    async def write(db: LedgerDatabase, batch: list[UsageRecord], _: list[bytes] | None) -> int:
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


class _Encoding(LedgerDatabase):
    """Never connected; its COPY data names the rows it was made from."""

    def __init__(self) -> None:
        super().__init__("postgresql://x@127.0.0.1:1/x", write_timeout_s=1, connect_timeout_s=1)

    async def encode(self, records: list[UsageRecord]) -> list[bytes] | None:
        return [f"{len(records)}".encode(), b"."]


async def test_a_busy_lanes_next_batch_is_made_ahead_and_written_from_that_data() -> None:
    lanes = Lanes(_Encoding, 1)
    buffer = collections.deque(make_record() for _ in range(5))
    wake, calls = asyncio.Event(), []
    first_may_end = asyncio.Event()

    async def write(db: LedgerDatabase, batch: list[UsageRecord], data: list[bytes] | None) -> int:
        calls.append((len(batch), data))
        if len(calls) == 1:
            await first_may_end.wait()
        return len(batch)

    async def feed() -> None:
        for n in (6, 4, 3):  # 4 and 3 rows: below min_batch until they add up to 7
            await asyncio.sleep(0.02)
            buffer.extend(make_record() for _ in range(n))
            wake.set()
        await asyncio.sleep(0.02)
        # taken while the lane wrote its first batch: out of the buffer, still held
        assert not buffer and lanes.held() == 5 + 13
        first_may_end.set()

    feeder = asyncio.create_task(feed())
    accepted: list[int] = []
    assert await lanes.drain(buffer, write, accepted.append, max_batch=50, min_batch=5, wake=wake)
    await feeder
    assert calls == [(5, None), (13, [b"6", b".", b"7", b"."])]  # its parts' data, in order
    assert accepted == [5, 13] and lanes.held() == 0


async def test_after_a_failure_the_next_batch_goes_back_behind_the_failed_rows() -> None:
    lanes = Lanes(_Encoding, 1)
    first = [make_record() for _ in range(10)]
    ahead = [make_record() for _ in range(8)]
    later = [make_record() for _ in range(2)]  # fewer than min_batch: left in the buffer
    buffer, wake, may_fail = collections.deque(first), asyncio.Event(), asyncio.Event()

    async def write(db: LedgerDatabase, batch: list[UsageRecord], data: list[bytes] | None) -> int:
        await may_fail.wait()
        raise TransientDbError

    async def feed() -> None:
        await asyncio.sleep(0.02)
        buffer.extend(ahead)
        wake.set()
        await asyncio.sleep(0.02)
        buffer.extend(later)
        assert list(buffer) == later and lanes.held() == 18
        may_fail.set()

    feeder = asyncio.create_task(feed())
    ok = await lanes.drain(buffer, write, lambda n: None, max_batch=10, min_batch=5, wake=wake)
    await feeder
    assert not ok and lanes.held() == 0
    assert list(buffer) == first + ahead + later


async def test_take_all_gives_back_the_next_batches_too() -> None:
    lanes = Lanes(_Encoding, 1)
    buffer = collections.deque(make_record() for _ in range(12))
    wake, started = asyncio.Event(), asyncio.Event()

    async def write(db: LedgerDatabase, batch: list[UsageRecord], data: list[bytes] | None) -> int:
        started.set()
        await asyncio.Event().wait()  # a write that never ends: cancelled below
        return 0

    async def feed() -> None:
        await started.wait()
        buffer.extend(make_record() for _ in range(6))
        wake.set()

    feeder = asyncio.create_task(feed())
    drain = asyncio.create_task(
        lanes.drain(buffer, write, lambda n: None, max_batch=12, min_batch=5, wake=wake)
    )
    await feeder
    await wait_until(lambda: not buffer)
    drain.cancel()
    with pytest.raises(asyncio.CancelledError):
        await drain
    rows = lanes.take_all()
    assert len(rows) == 18 and len(set(map(id, rows))) == 18 and lanes.held() == 0


async def test_rows_made_ahead_reach_the_table_exactly_and_its_rollups_add_up(
    database_url: str, ledger_engine: Engine
) -> None:
    lanes = Lanes(lambda: LedgerDatabase(database_url, write_timeout_s=30, connect_timeout_s=5), 2)
    records = [
        make_record(end_user=f"user-{i % 7}", tags={"feature": f"f-{i % 3}", "ü": 'ö"x'})
        for i in range(200)
    ]
    buffer, wake, made_ahead = collections.deque(records[:100]), asyncio.Event(), []

    async def write(db: LedgerDatabase, batch: list[UsageRecord], data: list[bytes] | None) -> int:
        made_ahead.append(data is not None)
        return len(batch) - len(await db.write(batch, True, data))

    try:
        # connected first (rows without an end user), so that the next batches can be
        # made ahead on these connections
        for db in lanes.databases:
            assert await db.write([make_record(end_user=None)], True) == []
        with ledger_engine.connect() as blocker:
            blocker.execute(text("LOCK TABLE usage_rollup_user_daily IN EXCLUSIVE MODE"))

            async def feed() -> None:
                await wait_until(lambda: _writers_waiting_on_a_lock(ledger_engine) == 2)
                buffer.extend(records[100:])  # both lanes wait: their next batches
                wake.set()
                await wait_until(lambda: not buffer and lanes.held() == 200)
                blocker.rollback()

            feeder = asyncio.create_task(feed())
            accepted: list[int] = []
            assert await lanes.drain(
                buffer, write, accepted.append, max_batch=50, min_batch=10, wake=wake
            )
            await feeder
    finally:
        await lanes.close()
    assert sum(accepted) == 200 and made_ahead == [False, False, True, True]
    with ledger_engine.connect() as conn:
        stored = conn.execute(
            text(
                "SELECT request_id, tags, fallback_path, actual_cost_usd FROM usage_records"
                " WHERE end_user IS NOT NULL"
            )  # fmt: skip
        ).all()
        users = text("SELECT sum(requests) FROM usage_rollup_user_daily")
        assert conn.execute(users).scalar_one() == 200
    by_id = {r.request_id: r for r in records}
    assert len(stored) == 200
    for request_id, tags, path, cost in stored:
        r = by_id[request_id]
        assert (tags, tuple(path), cost) == (r.tags, r.fallback_path, r.actual_cost_usd)
