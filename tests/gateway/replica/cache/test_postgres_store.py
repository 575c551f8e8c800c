"""The shared store on a real PostgreSQL (a scratch database migrated to the head)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from db.engine import libpq_url
from gateway.replica.cache.backends import MemoryLRU
from gateway.replica.cache.key_index import KeyIndex
from gateway.replica.cache.postgres_store import MAX_PENDING, PostgresStore, TieredStore
from tests.fixtures.database import scratch_database
from tests.fixtures.ports import claim_block


@pytest.fixture(scope="module")
def cache_db(database_url: str) -> Iterator[str]:
    with scratch_database(database_url, "costgate_cache_store") as url:
        yield url


def _rows(url: str) -> int:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT count(*) FROM response_cache").fetchone()
        return int(row[0]) if row else 0


async def test_two_replicas_stores_share_entries_and_their_lrus_keep_them(cache_db: str) -> None:
    one = TieredStore(MemoryLRU(1 << 20), PostgresStore(cache_db, 2.0))
    two = TieredStore(MemoryLRU(1 << 20), PostgresStore(cache_db, 2.0))
    try:
        one.put("k-shared", b"answer", 60)
        await one.flush()
        assert await two.get("k-shared") == b"answer"  # from the table
        assert await two.local.get("k-shared") == b"answer"  # and now in two's LRU
        assert await two.get("k-other") is None
        assert one.stats()["stored"] == 1 and one.stats()["errors"] == 0
    finally:
        await one.aclose()
        await two.aclose()


async def test_concurrent_lookups_and_stores_are_batched_and_expired_entries_miss(
    cache_db: str,
) -> None:
    store = PostgresStore(cache_db, 2.0)
    try:
        for i in range(50):
            store.put(f"k{i}", f"v{i}".encode(), 60)
        store.put("k-short", b"gone", 0.001)
        store.put("k0", b"v0-again", 60)  # the same key twice in a batch: the last wins
        await store.flush()
        found = await asyncio.gather(*(store.get(f"k{i}") for i in range(50)))
        assert found[0] == (b"v0-again", pytest.approx(60, abs=5))
        assert [f[0] for f in found[1:] if f] == [f"v{i}".encode() for i in range(1, 50)]
        assert await store.get("k-short") is None
        assert store.stats()["stored"] == 51
    finally:
        await store.aclose()


async def test_an_unreachable_store_is_counted_then_skipped_and_never_raises() -> None:
    block = claim_block(offsets=(0,))  # a port nothing listens on
    try:
        url = f"postgresql://postgres@127.0.0.1:{block.port(0)}/postgres"
        store = TieredStore(MemoryLRU(1 << 20), PostgresStore(url, 0.5))
        assert await store.get("k") is None  # failed: lookups are left alone for a second
        store.put("k", b"v", 60)  # stores are another side: tried, and failed
        await store.flush()
        store.put("k2", b"v2", 60)  # skipped
        assert await store.get("k") == b"v"  # this replica's LRU still answers
        assert await store.get("k3") is None  # skipped
        await store.flush()
        stats = store.stats()
        assert stats["errors"] == 2 and stats["skipped"] == 2 and stats["stored"] == 0
        await store.aclose()
    finally:
        block.release()


async def test_a_store_held_by_a_lock_is_a_miss_within_the_deadline(cache_db: str) -> None:
    store = PostgresStore(cache_db, 0.3)
    with psycopg.connect(libpq_url(cache_db)) as locker:
        locker.execute("LOCK TABLE response_cache IN ACCESS EXCLUSIVE MODE")
        try:
            assert await asyncio.wait_for(store.get("k-locked"), 5) is None
            assert store.stats()["errors"] == 1
        finally:
            locker.rollback()
    await store.aclose()
    again = PostgresStore(cache_db, 2.0)  # once the lock is gone, the table serves again
    again.put("k-locked", b"v", 60)
    await again.flush()
    assert await again.get("k-locked") == (b"v", pytest.approx(60, abs=5))
    await again.aclose()
    assert _rows(cache_db) >= 1


async def test_a_store_slower_than_the_lookups_deadline_still_lands(cache_db: str) -> None:
    """Nothing waits for a store: under load its round trip may outlast a lookup's
    deadline (50 ms by default) and must still be made, and lookups carry on meanwhile."""
    store = PostgresStore(cache_db, 0.1)
    with psycopg.connect(libpq_url(cache_db), autocommit=True) as watch, \
            psycopg.connect(libpq_url(cache_db)) as locker:  # fmt: skip
        locker.execute("LOCK TABLE response_cache IN SHARE MODE")  # reads go, writes wait
        try:
            store.put("k-slow", b"v", 60)

            def insert_waits() -> bool:
                row = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%%INSERT INTO response_cache%%'").fetchone()
                return bool(row and row[0])

            await _until(insert_waits)
            await asyncio.sleep(0.3)  # three lookup deadlines: the store still waits
            assert await store.get("k-other") is None
        finally:
            locker.rollback()
    await store.flush()
    assert store.stats()["errors"] == 0 and store.stats()["stored"] == 1
    assert await store.get("k-slow") == (b"v", pytest.approx(60, abs=5))
    await store.aclose()


async def test_stores_waiting_for_their_round_trip_are_bounded(cache_db: str) -> None:
    store = PostgresStore(cache_db, 0.1)
    for i in range(MAX_PENDING + 10):  # all before the writer's first round trip
        store.put(f"k-pending-{i}", b"v", 60)
    assert store.stats()["skipped"] == 10
    await store.flush()
    assert store.stats()["stored"] == MAX_PENDING and store.stats()["errors"] == 0
    await store.aclose()


async def _until(check: Any, timeout_s: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the time"
        await asyncio.sleep(0.01)


async def test_a_miss_no_store_announced_asks_nothing_and_another_replicas_store_is_heard(
    cache_db: str,
) -> None:
    one, two = PostgresStore(cache_db, 0.3), PostgresStore(cache_db, 0.3)
    try:
        assert await two.get("cg1:" + "1" * 64) is None  # starts listening
        await _until(lambda: two.index.ready)
        learned = two.stats()["learned"]  # what it loaded
        with psycopg.connect(libpq_url(cache_db)) as locker:
            # a round trip now would wait on the lock and time out: none is made
            locker.execute("LOCK TABLE response_cache IN ACCESS EXCLUSIVE MODE")
            try:
                assert await two.get("cg1:" + "2" * 64) is None
                assert two.stats()["absent"] == 1 and two.stats()["errors"] == 0
            finally:
                locker.rollback()
        key = "cg1:" + "3" * 64
        one.put(key, b"answer", 60)
        await one.flush()
        assert await one.get(key) == (b"answer", pytest.approx(60, abs=5))  # its own
        await _until(lambda: two.stats()["learned"] > learned)
        assert await two.get(key) == (b"answer", pytest.approx(60, abs=5))
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_lost_listener_sends_every_lookup_to_the_table_until_it_is_back(
    cache_db: str,
) -> None:
    store = PostgresStore(cache_db, 2.0)
    try:
        assert await store.get("cg1:" + "4" * 64) is None
        await _until(lambda: store.index.ready)
        with psycopg.connect(libpq_url(cache_db), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE"
                          " application_name = 'costgate-cache-index'"
                          " AND datname = current_database()")
            await _until(lambda: not store.index.ready)
            # a store it could not hear: written behind its back
            admin.execute("INSERT INTO response_cache VALUES (%s, 'v', now() + '1 min')",
                          ("cg1:" + "5" * 64,))
        assert await store.get("cg1:" + "5" * 64) == (b"v", pytest.approx(60, abs=5))
        await _until(lambda: store.index.ready)  # back, with what was written meanwhile
        assert store.index.may_hold("cg1:" + "5" * 64)
    finally:
        await store.aclose()


async def test_more_live_entries_than_its_index_holds_make_every_lookup_ask_the_table(
    cache_db: str,
) -> None:
    with psycopg.connect(libpq_url(cache_db), autocommit=True) as admin:
        for digit in "678":
            admin.execute("INSERT INTO response_cache VALUES (%s, 'v', now() + '1 min')"
                          " ON CONFLICT (key) DO NOTHING", ("cg1:" + digit * 64,))
    store = PostgresStore(cache_db, 2.0)
    store.index = KeyIndex(max_keys=2)
    try:
        store.listen()
        await _until(lambda: store.index.learned >= 2)  # loaded what fits
        assert not store.index.ready
        assert await store.get("cg1:" + "9" * 64) is None  # asked the table
        assert store.stats()["absent"] == 0
    finally:
        await store.aclose()
