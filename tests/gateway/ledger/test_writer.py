"""The ledger writer against a real PostgreSQL: batched, idempotent, and nothing lost when
the database goes away (a TCP proxy we cut and restore), hangs, refuses rows, or shuts down.
What happens to rows on disk is in test_writer_spool.py (and the file protocol itself in
test_spool.py); the writer's loops surviving their own failures in
test_writer_supervision.py."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import UsageRecord
from gateway.ledger.rows import COLUMNS
from gateway.ledger.writer import RecordWriter
from tests.fixtures.database import DatabaseProxy
from tests.gateway.ledger.support import (
    distinct_ids,
    make_record,
    row_count,
    spool_lines,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("clean_ledger")


async def test_a_record_is_stored_exactly_as_submitted(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url)
    await w.start()
    # tags go as jsonb, written by orjson on the writer's connection: text beyond ASCII
    # must arrive as it was
    tags = {"feature": "café ☕", "tier": 'über\\"quoted"'}
    record = make_record(end_user="user-7", session_id="s-1", tags=tags)
    w.submit(record)
    await wait_until(lambda: w.stats()["written"] == 1)
    with ledger_engine.connect() as conn:
        row = conn.execute(text("SELECT * FROM usage_records")).mappings().one()
    expected = record.to_dict()
    stored = {c: row[c] for c in COLUMNS}
    assert stored["status"] == "ok" and stored["usage_source"] == "provider"
    assert stored["fallback_path"] == ["gemini-2.5-flash", "deepseek-v3.2"]
    assert stored["actual_cost"] == Decimal("0.0004116000")
    assert stored["tags"] == tags
    assert UsageRecord.from_dict({**expected, **_jsonish(stored)}) == record


async def test_the_endpoint_and_cache_write_tokens_are_stored(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url)
    await w.start()
    w.submit(make_record(endpoint=Endpoint.RESPONSES, cache_write_tokens=300))
    w.submit(make_record(endpoint=Endpoint.EMBEDDINGS, completion_tokens=0, reasoning_tokens=0))
    await wait_until(lambda: w.stats()["written"] == 2)
    with ledger_engine.connect() as conn:
        rows = conn.execute(
            text("SELECT endpoint, cache_write_tokens FROM usage_records ORDER BY endpoint")
        ).all()
    assert [tuple(r) for r in rows] == [("embeddings", None), ("responses", 300)]


def _jsonish(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in row.items():
        if isinstance(v, uuid.UUID | Decimal):
            v = str(v)
        elif isinstance(v, dt.datetime):
            v = v.isoformat()
        out[k] = v
    return out


async def test_flushes_by_size_without_waiting_for_the_timer(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url, batch_size=50, flush_interval_s=3600)
    await w.start()
    for _ in range(100):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["written"] == 100)
    assert row_count(ledger_engine) == 100


async def test_flushes_by_time_below_the_batch_size(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url, batch_size=1000, flush_interval_s=0.1)
    await w.start()
    for _ in range(3):
        w.submit(make_record())
    await wait_until(lambda: row_count(ledger_engine) == 3)


async def test_the_same_batch_twice_leaves_one_row_per_request(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    batch = [make_record() for _ in range(40)]
    first = writer_factory(database_url, batch_size=40)
    second = writer_factory(database_url, batch_size=40)
    await first.start()
    await second.start()
    for r in batch:
        first.submit(r)
    await wait_until(lambda: first.stats()["written"] == 40)
    for r in batch + batch:
        second.submit(r)
    await wait_until(lambda: second.stats()["written"] == 80)
    assert row_count(ledger_engine) == 40 == distinct_ids(ledger_engine)


async def test_rows_go_to_disk_during_an_outage_and_reach_the_database_when_it_returns(
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
) -> None:
    w = writer_factory(database_proxy.url, batch_size=25)
    await w.start()
    for _ in range(30):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["written"] == 30)

    database_proxy.block()
    for _ in range(200):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["flush_errors"] >= 3)  # it kept trying, and failing
    s = w.stats()
    assert (s["buffer_depth"], s["spooled"], s["spool_depth"]) == (0, 200, 200)
    assert row_count(ledger_engine) == 30
    health = w.health()
    # an outage is what the spool is for: alive and ready, only the database is not ok
    assert health.alive and health.ready and not health.database_ok

    database_proxy.unblock()
    await wait_until(lambda: w.stats()["written"] == 230)
    assert row_count(ledger_engine) == 230 == distinct_ids(ledger_engine)
    s = w.stats()
    assert (s["buffer_depth"], s["spool_depth"], s["replayed"], s["dropped"]) == (0, 0, 200, 0)
    assert w.health().database_ok


async def test_close_flushes_what_is_buffered(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url, batch_size=1000, flush_interval_s=3600)
    await w.start()
    for _ in range(37):
        w.submit(make_record())
    await w.close(timeout_s=10)
    assert row_count(ledger_engine) == 37
    assert w.stats()["written"] == 37


@pytest.mark.parametrize(
    "poison",
    [
        {"status": "not-a-status"},  # the CHECK constraint refuses it
        {"app": None},  # NOT NULL
        {"latency_ms": 2**31},  # past int4: refused, never wrapped around
        {"prompt_tokens": "many"},  # psycopg cannot send it as an integer
        {"prompt_tokens": [1]},  # a type mismatch on the server, not a data error
        {"status": object()},  # psycopg cannot adapt it at all (and JSON cannot encode it)
    ],
    ids=["check", "not-null", "int4-range", "wrong-type", "type-mismatch", "unadaptable"],
)
async def test_a_row_the_database_refuses_is_dropped_and_counted_the_rest_are_written(
    database_url: str,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
    poison: dict[str, Any],
) -> None:
    w = writer_factory(database_url, batch_size=20, flush_interval_s=3600)
    await w.start()
    bad = make_record(**poison)
    for i in range(20):
        w.submit(bad if i == 7 else make_record())
    await wait_until(lambda: w.stats()["written"] == 19)
    assert w.stats()["dropped"] == 1
    assert row_count(ledger_engine) == 19
    with ledger_engine.connect() as conn:
        assert conn.execute(text("SELECT max(latency_ms) FROM usage_records")).scalar() == 850
    (rejected,) = (tmp_path / "spool").glob("usage-rejected-*.jsonl")
    assert str(bad.request_id) in rejected.read_text()
    w.submit(make_record())  # the writer carries on
    await w.close(timeout_s=10)
    assert row_count(ledger_engine) == 20


async def test_counters_add_up_after_an_outage_with_spill(
    database_proxy: DatabaseProxy,
    writer_factory: Callable[..., RecordWriter],
) -> None:
    w = writer_factory(database_proxy.url, batch_size=10, max_buffer=30)
    await w.start()
    database_proxy.block()
    for i in range(75):
        w.submit(make_record())
        if i % 10 == 9:
            await asyncio.sleep(0.05)  # requests arrive over time, not in one loop turn
    database_proxy.unblock()
    await wait_until(lambda: w.stats()["written"] == 75)
    await wait_until(lambda: w.stats()["spool_depth"] == 0)
    s = w.stats()
    assert s["queued"] == 75 and s["replayed"] == s["spooled"] and s["dropped"] == 0
    assert s["queued"] == (
        s["written"] + s["dropped"] + s["quarantined"] + s["buffer_depth"] + s["spool_depth"]
    )


async def test_a_hung_database_neither_blocks_submit_nor_hangs_close(
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    w = writer_factory(
        database_proxy.url, spool_dir=spool_dir, batch_size=10, write_timeout_s=1.0
    )
    await w.start()
    for _ in range(10):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["written"] == 10)

    database_proxy.stall()  # connections stay open, nothing comes back
    for _ in range(30):
        w.submit(make_record())
    await wait_until(lambda: w.stats()["flush_errors"] >= 1)  # the write timed out
    await wait_until(lambda: w.stats()["spooled"] == 30)  # and its rows went to disk
    await asyncio.wait_for(w.close(timeout_s=1.0), timeout=30)  # returned
    assert w.stats()["spooled"] == 30 and spool_lines(spool_dir) == 30

    database_proxy.unblock()
    second = writer_factory(database_proxy.url, spool_dir=spool_dir)
    await second.start()
    await wait_until(lambda: second.stats()["replayed"] == 30)
    assert row_count(ledger_engine) == 40 == distinct_ids(ledger_engine)
