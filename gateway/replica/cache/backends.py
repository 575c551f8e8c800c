"""Where entries live: an in-replica LRU bounded in bytes, Redis shared by replicas, or
(`postgres_store`) the ledger's PostgreSQL shared by replicas behind the LRU.

Both take and give bytes with a TTL. A lookup is awaited; a store (`put`) is handed over
and never awaited, because the answer is already on its way to the client.

Redis is best effort: each round trip has a short deadline, and after a failure it is
left alone for `RETRY_AFTER_S` (a lookup then costs nothing instead of a timeout each); a
failure or a skip is counted, never raised, so a request never fails for the cache. Its
commands are pipelined: the lookups and stores that arrive while a round trip is out go
together in the next one (the lookups as one MGET), so at concurrency 64 a replica makes
a few round trips where it would make 128, and at concurrency 1 nothing waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from typing import Any, Protocol

log = logging.getLogger("costgate.cache")

RETRY_AFTER_S = 1.0
MAX_BATCH = 256  # lookups, or stores, in one round trip
# stored bytes in one round trip: big entries must not push the lookups sharing it past
# the deadline (one entry over it still goes, alone)
MAX_BATCH_BYTES = 512 * 1024

Lookup = tuple[str, "asyncio.Future[bytes | None]"]  # a key, and who waits for its value


class CacheBackend(Protocol):
    async def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, value: bytes, ttl_s: float) -> None: ...
    def stats(self) -> dict[str, int]: ...
    async def flush(self) -> None: ...
    async def aclose(self) -> None: ...


class MemoryLRU:
    """Least recently used first out, once the values' bytes pass `max_bytes`."""

    def __init__(self, max_bytes: int, clock: Any = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self.bytes = 0
        self.evictions = 0
        self.stored = 0
        self.bytes_stored = 0

    async def get(self, key: str) -> bytes | None:
        item = self._items.get(key)
        if item is None:
            return None
        expires, value = item
        if expires <= self._clock():
            self._drop(key)
            return None
        self._items.move_to_end(key)
        return value

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        if self.keep(key, value, ttl_s):
            self.stored += 1
            self.bytes_stored += len(value)

    def keep(self, key: str, value: bytes, ttl_s: float) -> bool:
        """Hold an entry (one stored here, or found in a shared store) for `ttl_s`."""
        if len(value) > self.max_bytes:
            return False
        if key in self._items:
            self._drop(key)
        self._items[key] = (self._clock() + ttl_s, value)
        self.bytes += len(value)
        while self.bytes > self.max_bytes:
            oldest = next(iter(self._items))
            self._drop(oldest)
            self.evictions += 1
        return True

    def _drop(self, key: str) -> None:
        _, value = self._items.pop(key)
        self.bytes -= len(value)

    def stats(self) -> dict[str, int]:
        return {"bytes": self.bytes, "entries": len(self._items), "evictions": self.evictions,
                "stored": self.stored, "bytes_stored": self.bytes_stored}

    async def flush(self) -> None:
        return None  # stores are done when put returns

    async def aclose(self) -> None:
        self._items.clear()
        self.bytes = 0


class RedisBackend:
    def __init__(self, url: str, timeout_s: float) -> None:
        import redis.asyncio as aioredis  # only replicas configured for Redis load it

        self.timeout_s = timeout_s
        self._redis: Any = aioredis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self._down_until = 0.0
        self._gets: list[Lookup] = []
        self._sets: list[tuple[str, bytes, int]] = []
        self._sender: asyncio.Task[None] | None = None
        self.errors = 0
        self.skipped = 0
        self.stored = 0
        self.bytes_stored = 0
        self.round_trips = 0

    def _available(self) -> bool:
        if time.monotonic() < self._down_until:
            self.skipped += 1
            return False
        return True

    def _failed(self, err: BaseException) -> None:
        self.errors += 1
        self._down_until = time.monotonic() + RETRY_AFTER_S
        log.warning("response cache: Redis unavailable (%s); skipped", type(err).__name__)

    async def get(self, key: str) -> bytes | None:
        if not self._available():
            return None
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._gets.append((key, future))
        self._wake()
        return await future

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        if not self._available():
            return
        self._sets.append((key, value, max(1, int(ttl_s * 1000))))
        self._wake()

    def _wake(self) -> None:
        # one sender at a time: what arrives while its round trip is out waits for the next
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        try:
            while self._gets or self._sets:
                gets, self._gets = self._gets[:MAX_BATCH], self._gets[MAX_BATCH:]
                n, size = 0, 0
                while n < min(len(self._sets), MAX_BATCH) and (
                        n == 0 or size + len(self._sets[n][1]) <= MAX_BATCH_BYTES):
                    size += len(self._sets[n][1])
                    n += 1
                sets, self._sets = self._sets[:n], self._sets[n:]
                await self._round_trip(gets, sets)
        finally:
            self._sender = None
            _answer(self._gets, [None] * len(self._gets))  # left only if cancelled
            self._gets = []

    async def _round_trip(
        self, gets: list[Lookup], sets: list[tuple[str, bytes, int]]
    ) -> None:
        values: list[Any] = [None] * len(gets)
        try:
            async with asyncio.timeout(self.timeout_s):
                pipe = self._redis.pipeline(transaction=False)
                if gets:
                    pipe.mget([key for key, _ in gets])
                for key, value, ttl_ms in sets:
                    pipe.set(key, value, px=ttl_ms)
                replies = await pipe.execute()
            self.round_trips += 1
            if gets:
                values = replies[0]
            self.stored += len(sets)
            self.bytes_stored += sum(len(value) for _, value, _ in sets)
        except (Exception, TimeoutError) as err:  # noqa: BLE001 - never the request's failure
            self._failed(err)
        finally:  # cancelled too (a shutdown): no lookup is left waiting
            _answer(gets, values)

    def stats(self) -> dict[str, int]:
        return {"errors": self.errors, "skipped": self.skipped, "stored": self.stored,
                "bytes_stored": self.bytes_stored}

    async def flush(self) -> None:
        """Wait until what was handed over has been sent (tests, and a replica's shutdown)."""
        while self._sender is not None:
            await asyncio.shield(self._sender)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.flush()
        with contextlib.suppress(Exception):  # a connection that is already gone
            await self._redis.aclose()


def _answer(gets: list[Lookup], values: list[Any]) -> None:
    for (_, future), value in zip(gets, values, strict=True):
        if not future.done():  # a request that left stops waiting, nothing else
            future.set_result(None if value is None else bytes(value))


def describe_backend(redis_url: str | None, database: bool) -> tuple[str, bool]:
    """The backend a replica builds, and whether every replica and node shares it."""
    if redis_url:
        return "redis", True
    if database:
        return "postgresql (UNLOGGED table, in-replica LRU in front)", True
    return "in-replica LRU (no database: each replica has its own)", False
