"""The ledger partitioned by week: the migration keeps every row, weeks are created ahead
(rows the default partition took move into their week without touching the rollups),
and retention drops whole weeks while the writer writes without losing a row."""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text

from db.analytics.rollups import drop_weeks_before, prune
from db.engine import libpq_url, make_engine
from db.migrate import upgrade
from db.partitions.maintenance import ensure_partitions, partitions
from db.partitions.sql import DEFAULT, week_name
from gateway.ledger.writer import RecordWriter
from tests.db.analytics.test_rollups import assert_rollups_equal_ledger, varied, write
from tests.fixtures.database import scratch_database
from tests.gateway.ledger.support import make_record

NOW = dt.datetime.now(dt.UTC)
BY_DAY = (
    "SELECT (started_at AT TIME ZONE 'UTC')::date, count(*), sum(actual_cost_usd),"
    " sum(prompt_tokens), sum(latency_ms) FROM usage_records GROUP BY 1 ORDER BY 1"
)


@pytest.fixture
def scratch(database_url: str) -> Iterator[str]:
    with scratch_database(database_url, "costgate_partitions", migrate=False) as url:
        yield url


def _all(engine: Engine, sql: str) -> list[Any]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql))]


def _monday(at: dt.datetime) -> dt.date:
    return at.date() - dt.timedelta(days=at.weekday())


def test_the_migration_partitions_an_existing_ledger_without_losing_a_row(scratch: str) -> None:
    from gateway.ledger.rows import COLUMNS, record_row

    upgrade(scratch, "0014")
    rows = [varied(i, NOW - dt.timedelta(hours=7 * i)) for i in range(400)]  # ~117 days
    # as the writer of revision 0014 wrote them (today's conflicts on the new key)
    marks = ", ".join(["%s"] * len(COLUMNS))
    with psycopg.connect(libpq_url(scratch)) as conn:
        conn.cursor().executemany(
            f"INSERT INTO usage_records ({', '.join(COLUMNS)}) VALUES ({marks})",
            [record_row(r) for r in rows],
        )
    engine = make_engine(scratch)
    try:
        before = _all(engine, BY_DAY)
        rollups = _all(engine, "SELECT * FROM usage_rollup_daily ORDER BY 1, 2, 3, 4, 5, 6")
        upgrade(scratch, "0015")
        assert _all(engine, BY_DAY) == before  # counts and sums by day
        assert _all(engine, "SELECT * FROM usage_rollup_daily ORDER BY 1, 2, 3, 4, 5, 6") == rollups
        names = partitions(engine)
        assert DEFAULT in names
        oldest = _monday(rows[-1].started_at)
        assert week_name(oldest) in names  # from the oldest row's week ...
        assert week_name(_monday(NOW) + dt.timedelta(weeks=4)) in names  # ... to 4 ahead
        assert _all(engine, f"SELECT count(*) FROM {DEFAULT}") == [(0,)]
        upgrade(scratch)  # and on to today's rollups (0016: group keys)
        # the writer still skips a replayed row, and folds new ones
        asyncio.run(write(scratch, [rows[:10] + [varied(1, NOW)]]))
        assert _all(engine, "SELECT count(*) FROM usage_records") == [(401,)]
        assert_rollups_equal_ledger(engine)
    finally:
        engine.dispose()


def test_a_week_the_default_partition_took_moves_into_its_own_keeping_the_rollups(
    scratch: str,
) -> None:
    upgrade(scratch)
    far = NOW - dt.timedelta(days=400)  # older than any partition: the default takes it
    asyncio.run(write(scratch, [[varied(i, far + dt.timedelta(hours=i)) for i in range(30)]]))
    engine = make_engine(scratch)
    try:
        assert _all(engine, f"SELECT count(*) FROM {DEFAULT}") == [(30,)]
        rollups = _all(engine, "SELECT sum(requests), sum(list_cost_usd) FROM usage_rollup_daily")
        assert ensure_partitions(engine, since=far) >= 1
        assert week_name(_monday(far)) in partitions(engine)
        assert _all(engine, f"SELECT count(*) FROM {DEFAULT}") == [(0,)]
        assert _all(engine, "SELECT count(*) FROM usage_records") == [(30,)]
        totals = "SELECT sum(requests), sum(list_cost_usd) FROM usage_rollup_daily"
        assert _all(engine, totals) == rollups
        assert_rollups_equal_ledger(engine)
    finally:
        engine.dispose()


def test_dropping_weeks_while_the_writer_writes_loses_no_row(scratch: str) -> None:
    upgrade(scratch)
    engine = make_engine(scratch)
    old = NOW - dt.timedelta(weeks=10)
    ensure_partitions(engine, since=old)
    # ten old weeks of history, then the writer writing this week's rows meanwhile
    history = [varied(i, old + dt.timedelta(hours=3 * i)) for i in range(400)]  # 7 weeks
    asyncio.run(write(scratch, [history]))
    written = 3000
    done = threading.Event()

    def writer() -> None:
        async def go() -> None:
            with tempfile.TemporaryDirectory() as spool:
                w = RecordWriter(scratch, spool_dir=Path(spool), batch_size=100)
                await w.start()
                for i in range(written):
                    w.submit(make_record(request_id=uuid.uuid4(),
                                         started_at=NOW - dt.timedelta(seconds=i)))  # fmt: skip
                    if i % 50 == 0:
                        await asyncio.sleep(0.005)  # a few hundred requests a second
                await w.close(timeout_s=60)
                assert w.stats()["written"] == written and w.stats()["dropped"] == 0
            done.set()

        asyncio.run(go())

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        cutoff = dt.datetime.combine(_monday(NOW - dt.timedelta(weeks=2)), dt.time(), dt.UTC)
        dropped, rows = drop_weeks_before(engine, cutoff)  # while the writer writes
        assert dropped and rows > 0
        pruned = prune(engine, cutoff)  # and what is left before the cutoff, day by day
    finally:
        thread.join(timeout=180)
    try:
        assert done.is_set()
        kept = sum(1 for r in history if r.started_at >= cutoff)
        assert _all(engine, "SELECT count(*) FROM usage_records") == [(written + kept,)]
        assert rows + pruned + kept == len(history)
        # the rollups still count every row, dropped weeks included
        assert _all(engine, "SELECT sum(requests) FROM usage_rollup_daily") == [
            (written + len(history),)
        ]
    finally:
        engine.dispose()
