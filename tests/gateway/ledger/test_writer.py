"""The ledger writer against a real PostgreSQL: batched, idempotent, and nothing lost when
the database goes away (a TCP proxy we cut and restore), overflows memory, or shuts down."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource
from gateway.ledger import writer as record_writer
from gateway.ledger.writer import COLUMNS, RecordWriter
from tests.fixtures.database import DatabaseProxy

pytestmark = pytest.mark.usefixtures("clean_ledger")

T0 = dt.datetime(2026, 11, 3, 12, 0, tzinfo=dt.UTC)


def make_record(**overrides: Any) -> UsageRecord:
    fields: dict[str, Any] = {
        "request_id": uuid.uuid4(),
        "started_at": T0,
        "ended_at": T0 + dt.timedelta(milliseconds=850),
        "app": "checkout",
        "team": "payments",
        "key_id": uuid.uuid4(),
        "requested_model": "auto",
        "alias": "auto",
        "model": "deepseek-v3.2",
        "provider": "deepseek",
        "stream": True,
        "status": RequestStatus.OK,
        "http_status": 200,
        "error_class": None,
        "prompt_tokens": 1200,
        "cached_prompt_tokens": 200,
        "completion_tokens": 300,
        "reasoning_tokens": 0,
        "usage_source": UsageSource.PROVIDER,
        "latency_ms": 850,
        "ttft_ms": 180,
        "upstream_latency_ms": 840,
        "attempts": 2,
        "fallback_path": ("gemini-2.5-flash", "deepseek-v3.2"),
        "routing_policy": "weighted",
        "price_version_id": uuid.uuid4(),  # no such version: the row must still be kept
        "billing_currency": "USD",
        "actual_cost": Decimal("0.0004116000"),
        "actual_cost_usd": Decimal("0.0004116000"),
        "list_cost_usd": Decimal("0.0004116000"),
        "baseline_model": "gpt-4.1",
        "baseline_cost_usd": Decimal("0.0045000000"),
    }
    fields.update(overrides)
    return UsageRecord(**fields)


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def row_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM usage_records")).scalar_one())


def distinct_ids(engine: Engine) -> int:
    with engine.connect() as conn:
        q = text("SELECT count(DISTINCT request_id) FROM usage_records")
        return int(conn.execute(q).scalar_one())


@pytest.fixture
async def writer_factory(tmp_path: Path) -> AsyncIterator[Callable[..., RecordWriter]]:
    writers: list[RecordWriter] = []

    def make(url: str, **kwargs: Any) -> RecordWriter:
        kwargs.setdefault("spool_dir", tmp_path / "spool")
        kwargs.setdefault("flush_interval_s", 0.05)
        kwargs.setdefault("retry_max_s", 0.2)
        w = RecordWriter(url, **kwargs)
        writers.append(w)
        return w

    yield make
    for w in writers:
        await w.close(timeout_s=5)


def spool_lines(spool_dir: Path) -> int:
    return sum(
        len(p.read_text().splitlines()) for p in spool_dir.glob("usage-*.jsonl") if p.exists()
    )


async def test_a_record_is_stored_exactly_as_submitted(
    database_url: str, ledger_engine: Engine, writer_factory: Callable[..., RecordWriter]
) -> None:
    w = writer_factory(database_url)
    await w.start()
    record = make_record()
    w.submit(record)
    await wait_until(lambda: w.stats()["written"] == 1)
    with ledger_engine.connect() as conn:
        row = conn.execute(text("SELECT * FROM usage_records")).mappings().one()
    expected = record.to_dict()
    stored = {c: row[c] for c in COLUMNS}
    assert stored["status"] == "ok" and stored["usage_source"] == "provider"
    assert stored["fallback_path"] == ["gemini-2.5-flash", "deepseek-v3.2"]
    assert stored["actual_cost"] == Decimal("0.0004116000")
    assert UsageRecord.from_dict({**expected, **_jsonish(stored)}) == record


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


async def test_rows_are_kept_during_an_outage_and_written_when_the_database_returns(
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
    assert w.stats()["buffer_depth"] == 200
    assert row_count(ledger_engine) == 30

    database_proxy.unblock()
    await wait_until(lambda: w.stats()["written"] == 230)
    assert row_count(ledger_engine) == 230 == distinct_ids(ledger_engine)
    s = w.stats()
    assert (s["buffer_depth"], s["spooled"], s["dropped"]) == (0, 0, 0)


async def test_past_the_memory_bound_rows_spool_to_disk_and_replay_when_the_database_returns(
    database_proxy: DatabaseProxy,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    database_proxy.block()
    w = writer_factory(database_proxy.url, batch_size=50, max_buffer=100, spool_dir=spool_dir)
    await w.start()  # starting while the database is away is fine
    for _ in range(350):
        w.submit(make_record())
    s = w.stats()
    assert (s["queued"], s["buffer_depth"], s["spooled"], s["spool_depth"]) == (350, 100, 250, 250)
    await wait_until(lambda: spool_lines(spool_dir) == 250)  # on disk, not only in a buffer

    database_proxy.unblock()
    await wait_until(lambda: w.stats()["written"] == 350)
    assert row_count(ledger_engine) == 350 == distinct_ids(ledger_engine)
    s = w.stats()
    assert (s["replayed"], s["spool_depth"], s["buffer_depth"], s["dropped"]) == (250, 0, 0, 0)
    await wait_until(lambda: not list(spool_dir.glob("usage-*.jsonl")))  # replayed, removed


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


async def test_close_while_the_database_is_away_spools_and_the_next_writer_replays(
    database_proxy: DatabaseProxy,
    database_url: str,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    database_proxy.block()
    first = writer_factory(database_proxy.url, spool_dir=spool_dir)
    await first.start()
    for _ in range(60):
        first.submit(make_record())
    await first.close(timeout_s=0.5)
    assert first.stats()["spooled"] == 60 and spool_lines(spool_dir) == 60
    first.submit(make_record())  # a late record after close: spooled, never raised
    assert first.stats()["spooled"] == 61

    second = writer_factory(database_url, spool_dir=spool_dir)
    await second.start()
    assert second.stats()["adopted"] == 61
    await wait_until(lambda: second.stats()["replayed"] == 61)
    assert row_count(ledger_engine) == 61


@pytest.mark.parametrize(
    "poison",
    [
        {"status": "not-a-status"},  # the CHECK constraint refuses it
        {"app": None},  # NOT NULL
        {"latency_ms": 2**31},  # past int4: refused, never wrapped around
        {"prompt_tokens": "many"},  # psycopg cannot send it as an integer
    ],
    ids=["check", "not-null", "int4-range", "wrong-type"],
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
    for _ in range(75):
        w.submit(make_record())
    database_proxy.unblock()
    await wait_until(lambda: w.stats()["written"] == 75)
    s = w.stats()
    assert s["queued"] == 75 and s["spooled"] == 45 and s["replayed"] == 45
    assert s["queued"] == s["written"] + s["dropped"] + s["buffer_depth"] + s["spool_depth"]


async def dead_pid() -> int:
    proc = await asyncio.create_subprocess_exec("true")
    await proc.wait()
    return proc.pid


async def test_spool_left_by_a_dead_process_is_replayed_and_its_corrupt_lines_counted(
    database_url: str,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
) -> None:
    pid = await dead_pid()
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    good = [make_record() for _ in range(3)]
    lines = [r.to_json() + "\n" for r in good] + ["{not json}\n", good[0].to_json()[:40]]
    (spool_dir / f"usage-spool-{pid}-deadbeef0000.jsonl").write_text("".join(lines))

    w = writer_factory(database_url, spool_dir=spool_dir)
    await w.start()
    assert w.stats()["adopted"] == 5
    await wait_until(lambda: w.stats()["spool_depth"] == 0)
    s = w.stats()
    assert (s["replayed"], s["dropped"]) == (3, 2)
    assert row_count(ledger_engine) == 3


async def test_a_running_writer_adopts_the_spool_of_a_sibling_that_died_later(
    database_url: str,
    ledger_engine: Engine,
    writer_factory: Callable[..., RecordWriter],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(record_writer, "ORPHAN_SCAN_INTERVAL_S", 0.2)
    spool_dir = tmp_path / "spool"
    w = writer_factory(database_url, spool_dir=spool_dir)
    await w.start()
    orphan = spool_dir / f"usage-spool-{await dead_pid()}-cafe00000000.jsonl"
    orphan.write_text("".join(make_record().to_json() + "\n" for _ in range(4)))
    await wait_until(lambda: w.stats()["replayed"] == 4)
    assert row_count(ledger_engine) == 4 and not orphan.exists()


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
    assert w.stats()["buffer_depth"] == 30
    await asyncio.wait_for(w.close(timeout_s=1.0), timeout=30)  # returned, and spooled
    assert w.stats()["spooled"] == 30 and spool_lines(spool_dir) == 30

    database_proxy.unblock()
    second = writer_factory(database_proxy.url, spool_dir=spool_dir)
    await second.start()
    await wait_until(lambda: second.stats()["replayed"] == 30)
    assert row_count(ledger_engine) == 40 == distinct_ids(ledger_engine)
