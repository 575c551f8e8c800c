from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.replica.cache.backends import MemoryLRU, RedisBackend
from tests.fixtures.ports import claim_block
from tests.gateway.replica.cache.conftest import REDIS_PORT, RedisProcess


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_lru_is_bounded_in_bytes_and_drops_the_least_recently_used() -> None:
    lru = MemoryLRU(max_bytes=10)
    lru.put("a", b"1234", 60)
    lru.put("b", b"1234", 60)
    assert await lru.get("a") == b"1234"  # now b is the least recently used
    lru.put("c", b"1234", 60)
    assert await lru.get("b") is None
    assert await lru.get("a") == b"1234" and await lru.get("c") == b"1234"
    lru.put("big", b"x" * 11, 60)
    assert await lru.get("big") is None
    assert lru.stats() == {"bytes": 8, "entries": 2, "evictions": 1, "stored": 3,
                           "bytes_stored": 12}


async def test_lru_entries_expire() -> None:
    clock = Clock()
    lru = MemoryLRU(max_bytes=100, clock=clock)
    lru.put("a", b"v", 2)
    clock.now = 1.9
    assert await lru.get("a") == b"v"
    clock.now = 2.0
    assert await lru.get("a") is None
    assert lru.stats()["bytes"] == 0


async def test_an_unreachable_redis_is_counted_and_then_skipped_never_raised() -> None:
    block = claim_block()  # a port nothing listens on
    try:
        backend = RedisBackend(f"redis://127.0.0.1:{block.port(3)}/0", timeout_s=0.5)
        assert await backend.get("k") is None
        backend.put("k", b"v", 10)  # skipped: Redis is left alone for a second
        await backend.flush()
        assert await backend.get("k") is None
        assert backend.stats() == {"errors": 1, "skipped": 2, "stored": 0, "bytes_stored": 0}
        await backend.aclose()
    finally:
        block.release()


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    block = claim_block(offsets=(REDIS_PORT,))
    server = RedisProcess(block.port(REDIS_PORT), Path(tmp_path_factory.mktemp("redis")))
    try:
        yield server
    finally:
        server.stop()
        block.release()


async def test_redis_stores_and_answers_with_the_ttl(redis: RedisProcess) -> None:
    backend = RedisBackend(redis.url, timeout_s=1.0)
    backend.put("t:a", b"\x00value\n", 60)
    backend.put("t:short", b"v", 0.2)
    await backend.flush()
    assert await backend.get("t:a") == b"\x00value\n"
    assert await backend.get("t:missing") is None
    assert 0 < int(redis.command("PTTL", "t:short")) <= 200
    await asyncio.sleep(0.3)
    assert await backend.get("t:short") is None
    assert backend.stats()["stored"] == 2 and backend.stats()["bytes_stored"] == 8
    await backend.aclose()


async def test_concurrent_lookups_and_stores_share_round_trips(redis: RedisProcess) -> None:
    backend = RedisBackend(redis.url, timeout_s=1.0)
    for i in range(64):
        backend.put(f"p:{i}", str(i).encode(), 60)
    await backend.flush()
    trips = backend.round_trips
    # 64 lookups at once, as 64 requests in flight make them, and stores among them
    keys = [f"p:{i}" if i % 2 else f"p:none:{i}" for i in range(64)]
    results = await asyncio.gather(*(backend.get(k) for k in keys), _stores(backend))
    values = results[:64]
    assert values == [str(i).encode() if i % 2 else None for i in range(64)]
    assert backend.round_trips - trips <= 3  # not 64 lookups and 32 stores one by one
    await backend.flush()
    assert await backend.get("q:31") == b"31"
    await backend.aclose()


async def _stores(backend: RedisBackend) -> None:
    for i in range(32):
        backend.put(f"q:{i}", str(i).encode(), 60)


async def test_a_lookup_whose_request_left_does_not_break_the_others(redis: RedisProcess) -> None:
    backend = RedisBackend(redis.url, timeout_s=1.0)
    backend.put("c:1", b"one", 60)
    await backend.flush()
    gone = asyncio.ensure_future(backend.get("c:1"))
    kept = asyncio.ensure_future(backend.get("c:1"))
    await asyncio.sleep(0)
    gone.cancel()
    assert await kept == b"one"
    assert backend.errors == 0
    await backend.aclose()


async def test_big_stores_are_spread_over_round_trips(redis: RedisProcess) -> None:
    backend = RedisBackend(redis.url, timeout_s=2.0)
    big = b"x" * (300 * 1024)  # two of these pass a round trip's byte budget
    for i in range(3):
        backend.put(f"big:{i}", big, 60)
    await backend.flush()
    assert backend.round_trips == 3 and backend.errors == 0
    assert [await backend.get(f"big:{i}") for i in range(3)] == [big] * 3
    await backend.aclose()


async def test_a_slow_redis_is_a_miss_within_the_deadline_and_then_skipped(
    redis: RedisProcess,
) -> None:
    backend = RedisBackend(redis.url, timeout_s=0.1)
    backend.put("s:1", b"one", 60)
    await backend.flush()
    redis.command("CLIENT", "PAUSE", "600")  # Redis answers nobody for 0.6 s
    started = asyncio.get_running_loop().time()
    assert await backend.get("s:1") is None
    assert asyncio.get_running_loop().time() - started < 0.4  # the deadline, not the pause
    assert await backend.get("s:1") is None  # left alone for a second: no wait at all
    assert backend.stats()["errors"] == 1 and backend.stats()["skipped"] == 1
    await asyncio.sleep(1.2)
    assert await backend.get("s:1") == b"one"  # back after its second
    await backend.aclose()
