"""The end users by kind hold the closed UTC days only: the day close sums them from the
per-app user rollup, a late row of a closed day is folded by its writer, and either way
the rollup equals plain SQL over the raw rows, also when a writer and a close overlap."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text

from db.analytics.rollups import close_days, rebuild_all, status
from db.engine import libpq_url, make_engine
from db.migrate import downgrade, upgrade
from gateway.ledger.database import LedgerDatabase
from tests.db.analytics.attribution_seed import END, START, attributed, reopen_days
from tests.db.analytics.attribution_seed import write_attributed as write
from tests.fixtures.database import scratch_database

# written apart from attribution_sql on purpose: the raw rows' sums per day, kind, user
RAW = """
SELECT date_trunc('day', started_at, 'UTC') AS day,
       CASE WHEN endpoint = 'embeddings' THEN 'embeddings' ELSE 'completions' END AS kind,
       end_user, count(*), coalesce(sum(prompt_tokens), 0),
       coalesce(sum(cached_prompt_tokens), 0), coalesce(sum(completion_tokens), 0),
       count(*) FILTER (WHERE actual_cost_usd IS NULL
                        AND (status IN ('ok', 'cancelled') OR usage_source = 'estimated')),
       count(*) FILTER (WHERE cache_hit), sum(actual_cost_usd), sum(list_cost_usd),
       sum(list_cost_usd - actual_cost_usd)
FROM usage_records WHERE end_user IS NOT NULL {where} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
"""
KINDS = """
SELECT bucket, kind, end_user, requests, prompt_tokens, cached_prompt_tokens,
       completion_tokens, unknown_cost_requests, cache_hit_requests, actual_cost_usd,
       list_cost_usd, savings_usd
FROM usage_rollup_user_kind_daily {where} ORDER BY 1, 2, 3
"""
DAY = dt.timedelta(days=1)


def _rows(engine: Engine, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params).all()]


def _raw(engine: Engine, before: dt.datetime | None = None) -> list[tuple[Any, ...]]:
    if before is None:
        return _rows(engine, RAW.format(where=""))
    return _rows(engine, RAW.format(where="AND started_at < :b"), b=before)


def _kinds(engine: Engine) -> list[tuple[Any, ...]]:
    return _rows(engine, KINDS.format(where=""))


def _closed(engine: Engine) -> dt.datetime | None:
    return status(engine).kinds_closed_before


def _copy_rows(conn: psycopg.Connection[Any], day: dt.datetime) -> int:
    """New raw rows (new ids, same values) copied from `day`'s, in `conn`'s transaction."""
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS more (LIKE usage_records) ON COMMIT DROP;"
        " DELETE FROM more"
    )
    conn.execute(
        "INSERT INTO more SELECT * FROM usage_records WHERE started_at >= %s"
        " AND started_at < %s AND end_user IS NOT NULL",
        (day, day + DAY),
    )
    conn.execute("UPDATE more SET request_id = gen_random_uuid()")
    return conn.execute("INSERT INTO usage_records SELECT * FROM more").rowcount


def test_open_days_wait_for_the_close_then_equal_the_raw_rows_late_rows_too(
    database_url: str, ledger_engine: Engine, reopens_days: None
) -> None:
    write(database_url)
    assert _kinds(ledger_engine) == _raw(ledger_engine)  # every day closed (the migration's)
    reopen_days(ledger_engine, START + DAY)
    assert _kinds(ledger_engine) == _raw(ledger_engine, START + DAY)  # only the closed day
    assert status(ledger_engine).kinds_closed_before == START + DAY

    written = close_days(ledger_engine, until=END)
    assert written == len(_raw(ledger_engine)) - len(_raw(ledger_engine, START + DAY)) > 0
    assert _kinds(ledger_engine) == _raw(ledger_engine)
    assert _closed(ledger_engine) == END
    assert close_days(ledger_engine, until=END) == 0  # nothing left to close

    # a late row of a closed day (a spool replayed after the close): its writer folds it
    late = [attributed(i) for i in range(200, 230)]
    asyncio.run(_write(database_url, late))
    assert _kinds(ledger_engine) == _raw(ledger_engine)
    assert rebuild_all(ledger_engine) == 140  # the rebuild folds the closed days the same
    assert _kinds(ledger_engine) == _raw(ledger_engine)


def test_a_rebuild_leaves_the_open_days_to_the_close(
    database_url: str, ledger_engine: Engine, reopens_days: None
) -> None:
    write(database_url)
    reopen_days(ledger_engine, START + DAY)
    assert rebuild_all(ledger_engine) == 110
    assert _kinds(ledger_engine) == _raw(ledger_engine, START + DAY)
    close_days(ledger_engine, until=END)
    assert _kinds(ledger_engine) == _raw(ledger_engine)


def test_the_writer_closes_the_oldest_open_day_before_its_first_batch(
    database_url: str, ledger_engine: Engine, reopens_days: None
) -> None:
    write(database_url)
    reopen_days(ledger_engine, START)
    assert _kinds(ledger_engine) == []
    asyncio.run(_write(database_url, [attributed(300)]))  # a late row: START - 5 days
    # one day per hour (a day's close is bounded; several wait after an outage)
    assert _closed(ledger_engine) == START + DAY
    assert _kinds(ledger_engine) == _raw(ledger_engine, START + DAY) != []


async def _write(url: str, rows: list[Any]) -> None:
    db = LedgerDatabase(url, write_timeout_s=30, connect_timeout_s=5)
    try:
        assert await db.write(rows) == []
    finally:
        await db.close()


def _wait_for_lock(ledger_engine: Engine, application: str) -> None:
    """Until the backend of `application` waits on a lock (bounded)."""
    for _ in range(500):
        waiting = _rows(
            ledger_engine,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = :a"
            " AND wait_event_type = 'Lock'",
            a=application,
        )[0][0]
        if waiting:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{application} never waited on a lock")


@pytest.mark.parametrize("first", ["writer", "close"])
def test_a_writer_and_a_close_that_overlap_count_each_row_once(
    database_url: str, ledger_engine: Engine, reopens_days: None, first: str
) -> None:
    """The writer folds the per-app rollup, then reads the mark; the close locks that
    rollup first. Whichever holds it first, the other waits, and the day's new rows are
    counted by exactly one of them."""
    write(database_url)
    reopen_days(ledger_engine, START)
    url = libpq_url(database_url)
    with (
        psycopg.connect(url, application_name="test-writer") as writer,
        psycopg.connect(url, application_name="test-close") as closer,
    ):
        if first == "writer":
            assert _copy_rows(writer, START) > 0  # folded, not committed
            done = threading.Thread(
                target=lambda: closer.execute("SELECT usage_rollup_close_user_kinds(%s)", (END,))
            )
            done.start()
            _wait_for_lock(ledger_engine, "test-close")
            writer.commit()
            done.join(timeout=30)
            closer.commit()
        else:
            closer.execute("SELECT usage_rollup_close_user_kinds(%s)", (END,))  # not committed
            done = threading.Thread(target=lambda: _copy_rows(writer, START))
            done.start()
            _wait_for_lock(ledger_engine, "test-writer")
            closer.commit()
            done.join(timeout=30)
            writer.commit()
        assert not done.is_alive()
    assert _closed(ledger_engine) == END
    assert _kinds(ledger_engine) == _raw(ledger_engine)
    assert _rows(ledger_engine, "SELECT count(*) FROM usage_records")[0][0] > 110


@pytest.fixture
def scratch(database_url: str) -> Iterator[str]:
    with scratch_database(database_url, "costgate_migration_0019", migrate=False) as url:
        yield url


def test_0019_opens_today_only_and_its_downgrade_gives_every_day_back(scratch: str) -> None:
    upgrade(scratch, "0018")
    now = dt.datetime.now(dt.UTC)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    rows = [attributed(i) for i in range(60)]  # past days
    rows += [dataclasses.replace(attributed(i), request_id=uuid.uuid4(), started_at=now,
                                 ended_at=now) for i in range(1, 30)]  # fmt: skip
    asyncio.run(_write(scratch, rows))  # folded by 0018's trigger: every day
    engine = make_engine(scratch)
    try:
        every_day = _raw(engine)
        assert _kinds(engine) == every_day and every_day[-1][0] == today

        upgrade(scratch)
        assert _closed(engine) == today
        assert _kinds(engine) == _raw(engine, today)  # today's: regrouped when read

        downgrade(scratch, "0018")
        assert _kinds(engine) == every_day
    finally:
        engine.dispose()
