from __future__ import annotations

from gateway.replica.cache.backends import MemoryLRU, RedisBackend
from tests.fixtures.ports import claim_block


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_lru_is_bounded_in_bytes_and_drops_the_least_recently_used() -> None:
    lru = MemoryLRU(max_bytes=10)
    await lru.set("a", b"1234", 60)
    await lru.set("b", b"1234", 60)
    assert await lru.get("a") == b"1234"  # now b is the least recently used
    await lru.set("c", b"1234", 60)
    assert await lru.get("b") is None
    assert await lru.get("a") == b"1234" and await lru.get("c") == b"1234"
    assert lru.stats() == {"bytes": 8, "entries": 2, "evictions": 1}
    assert not await lru.set("big", b"x" * 11, 60)


async def test_lru_entries_expire() -> None:
    clock = Clock()
    lru = MemoryLRU(max_bytes=100, clock=clock)
    await lru.set("a", b"v", 2)
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
        assert await backend.set("k", b"v", 10) is False
        assert await backend.get("k") is None
        assert backend.stats() == {"errors": 1, "skipped": 2}
        await backend.aclose()
    finally:
        block.release()
