"""Where entries live: an in-replica LRU bounded in bytes, or Redis shared by replicas.

Both take and give bytes with a TTL. Redis is best effort: each call has a short
deadline, and after a failure it is left alone for `RETRY_AFTER_S` (a lookup then costs
nothing instead of a timeout each); a failure or a skip is counted, never raised, so a
request never fails for the cache.
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


class CacheBackend(Protocol):
    async def get(self, key: str) -> bytes | None: ...
    async def set(self, key: str, value: bytes, ttl_s: float) -> bool: ...
    def stats(self) -> dict[str, int]: ...
    async def aclose(self) -> None: ...


class MemoryLRU:
    """Least recently used first out, once the values' bytes pass `max_bytes`."""

    def __init__(self, max_bytes: int, clock: Any = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self.bytes = 0
        self.evictions = 0

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

    async def set(self, key: str, value: bytes, ttl_s: float) -> bool:
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
        return {"bytes": self.bytes, "entries": len(self._items), "evictions": self.evictions}

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
        self.errors = 0
        self.skipped = 0

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
        try:
            async with asyncio.timeout(self.timeout_s):
                value = await self._redis.get(key)
        except (Exception, TimeoutError) as err:  # noqa: BLE001 - never the request's failure
            self._failed(err)
            return None
        return None if value is None else bytes(value)

    async def set(self, key: str, value: bytes, ttl_s: float) -> bool:
        if not self._available():
            return False
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._redis.set(key, value, px=max(1, int(ttl_s * 1000)))
        except (Exception, TimeoutError) as err:  # noqa: BLE001 - never the request's failure
            self._failed(err)
            return False
        return True

    def stats(self) -> dict[str, int]:
        return {"errors": self.errors, "skipped": self.skipped}

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):  # a connection that is already gone
            await self._redis.aclose()
