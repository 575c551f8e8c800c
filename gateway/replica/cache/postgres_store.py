"""The response cache shared by every replica and node without Redis: an UNLOGGED table in
the ledger's PostgreSQL (`db/shared_state/response_cache.py`), behind each replica's LRU.

Why this store (measured, docs/CACHE.md): the ledger's database is always there, a
lookup by primary key is one round trip of about 0.1 ms here, and a batch of 64 keys
costs about the same as one; a Ray actor holding the entries would cost 0.5-0.7 ms a
call and serialise every replica's lookups on one process.

Lookups and stores each have their own connection and their own sender, so a store never
delays a lookup: what arrives while a round trip is out goes in the next one (the
lookups as one `key = ANY(...)`, the stores as one INSERT of arrays, after a window of
`STORE_WINDOW_S` that lets a few gather). A lookup has the deadline
`cache.redis_timeout_s`, since a request waits for it; a store, which nothing waits for,
at least `STORE_TIMEOUT_S` (under load a replica's event loop alone can hold a round trip
past 50 ms: with that deadline up to a quarter of the stores were dropped at concurrency
64). A failure or a timeout is counted, the connection dropped, and that side (lookups or
stores) left alone for `RETRY_AFTER_S`: a request never fails for the cache. Expired rows
are deleted by every replica now and then, a bounded number at a time.

The LRU in front (`TieredStore`) answers a repeat this replica saw without a round trip;
what it misses, the table answers, and an entry found there is kept in the LRU for the
rest of its life.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import psycopg

from db.engine import libpq_url
from db.shared_state.response_cache import (
    CHANNEL,
    LAST_EXPIRY_SQL,
    LIVE_KEYS_SQL,
    LOOKUP_SQL,
    PRUNE_SQL,
    STORE_SQL,
)
from gateway.replica.cache.backends import MAX_BATCH, MAX_BATCH_BYTES, RETRY_AFTER_S, MemoryLRU
from gateway.replica.cache.key_index import KeyIndex

log = logging.getLogger("costgate.cache")

PRUNE_EVERY_S = 30.0
# stores wait this long for others to go with them: a replica then makes one INSERT (and
# every replica hears one notification) for several answers, not one each; its CPU and
# the server's are the same cores as the requests'. That per-batch work was most of what
# a miss cost at concurrency 1: p50 +0.23 to +0.35 ms over the cache off at 50 ms, median
# +0.12 (-0.06 to +0.37, six runs) at 100 (docs/CACHE.md). This replica's LRU has the
# entry at once, the other replicas 100 ms later at most
STORE_WINDOW_S = 0.1
PRUNE_ROWS = 5000
STORE_TIMEOUT_S = 1.0
# stores waiting for a slow round trip beyond this many are dropped (counted as skipped)
MAX_PENDING = 4 * MAX_BATCH


class _Link:
    """One connection, opened on first use and again after a failure."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url, self.timeout_s = url, timeout_s
        self.conn: psycopg.AsyncConnection[Any] | None = None
        self.down_until = 0.0  # after a failure: left alone until then

    async def execute(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        async with asyncio.timeout(self.timeout_s):
            if self.conn is None or self.conn.closed:
                self.conn = await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=max(1, int(self.timeout_s)),
                    application_name="costgate-cache",
                )
            # binary both ways: bytea goes as it is, not as hex to encode and parse
            cur = await self.conn.execute(sql, params, prepare=True, binary=True)
            return await cur.fetchall() if cur.description else []

    async def drop(self) -> None:
        """After a failure or a timeout: the connection may be mid-query, start anew."""
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


class PostgresStore:
    def __init__(self, database_url: str, timeout_s: float) -> None:
        url = libpq_url(database_url)
        self.timeout_s = timeout_s
        self._reads = _Link(url, timeout_s)
        self._writes = _Link(url, max(timeout_s, STORE_TIMEOUT_S))
        self._gets: list[tuple[str, asyncio.Future[tuple[bytes, float] | None]]] = []
        self._sets: dict[str, tuple[bytes, float]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._pruned_at = time.monotonic()
        self.errors = self.skipped = self.stored = self.bytes_stored = self.absent = 0
        self._url = url
        self.index = KeyIndex()
        self._listener: asyncio.Task[None] | None = None

    def _available(self, link: _Link) -> bool:
        if time.monotonic() < link.down_until:
            self.skipped += 1
            return False
        return True

    async def _failed(self, link: _Link, err: BaseException) -> None:
        self.errors += 1
        link.down_until = time.monotonic() + RETRY_AFTER_S
        log.warning("response cache: PostgreSQL unavailable (%s); skipped", type(err).__name__)
        await link.drop()

    async def get(self, key: str) -> tuple[bytes, float] | None:
        """The entry's bytes and the seconds it has left to live."""
        self.listen()
        if not self.index.may_hold(key):
            self.absent += 1  # no store anywhere announced it: no round trip
            return None
        if not self._available(self._reads):
            return None
        future: asyncio.Future[tuple[bytes, float] | None] = (
            asyncio.get_running_loop().create_future())
        self._gets.append((key, future))
        if self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._read())
        return await future

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        self.listen()
        if not self._available(self._writes):
            return
        if len(self._sets) >= MAX_PENDING and key not in self._sets:
            self.skipped += 1  # the table is slow: this replica's LRU still has it
            return
        self._sets[key] = (value, float(ttl_s))  # one type for the array: float8
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _read(self) -> None:
        try:
            while self._gets:
                gets, self._gets = self._gets[:MAX_BATCH], self._gets[MAX_BATCH:]
                found: dict[str, tuple[bytes, float]] = {}
                try:
                    rows = await self._reads.execute(LOOKUP_SQL, ([k for k, _ in gets],))
                    found = {k: (bytes(v), float(left)) for k, v, left in rows}
                except (Exception, TimeoutError) as err:  # noqa: BLE001 - never the request's
                    await self._failed(self._reads, err)
                finally:
                    for key, future in gets:
                        if not future.done():
                            future.set_result(found.get(key))
        finally:
            self._reader = None
            for _, future in self._gets:  # left only if cancelled
                if not future.done():
                    future.set_result(None)
            self._gets = []

    async def _write(self) -> None:
        try:
            while self._sets:
                # before every round trip, not only the first: under load the stores that
                # came during one would otherwise go at once, a few per INSERT
                if len(self._sets) < MAX_BATCH:
                    await asyncio.sleep(STORE_WINDOW_S)
                batch: list[tuple[str, bytes, float]] = []
                size = 0
                for key in list(self._sets):
                    value, ttl = self._sets[key]
                    if batch and (len(batch) >= MAX_BATCH or size + len(value) > MAX_BATCH_BYTES):
                        break
                    del self._sets[key]
                    batch.append((key, value, ttl))
                    size += len(value)
                try:
                    columns = tuple(map(list, zip(*batch, strict=True)))
                    await self._writes.execute(STORE_SQL, columns)
                    for key, _, ttl in batch:  # known here at once, elsewhere when heard
                        self.index.add(key, ttl)
                    self.stored += len(batch)
                    self.bytes_stored += size
                    if time.monotonic() - self._pruned_at > PRUNE_EVERY_S:
                        self._pruned_at = time.monotonic()
                        await self._writes.execute(PRUNE_SQL, (PRUNE_ROWS,))
                except (Exception, TimeoutError) as err:  # noqa: BLE001 - never the request's
                    await self._failed(self._writes, err)
        finally:
            self._writer = None

    # -- the index of what the table holds ------------------------------------------------

    def listen(self) -> None:
        """Start the index's listener (if not yet): a replica calls it when it starts."""
        if self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._hear())

    async def _hear(self) -> None:
        """LISTEN, load the live keys, then learn each store's keys; on a failure the
        index is not trusted (every lookup asks the table) until this is back."""
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, connect_timeout=max(1, int(self.timeout_s)),
                    application_name="costgate-cache-index")
                await conn.execute(f"LISTEN {CHANNEL}")
                # after LISTEN: a store that commits from here on is heard, and one that
                # committed before is in what this reads (notifications queue meanwhile)
                room = self.index.max_keys
                live = await (await conn.execute(LIVE_KEYS_SQL, (room + 1,))).fetchall()
                beyond = None
                if len(live) > room:  # not all fit: trusted once the rest could be gone
                    row = await (await conn.execute(LAST_EXPIRY_SQL)).fetchone()
                    beyond = float(row[0]) if row and row[0] is not None else 0.0
                self.index.load(live[:room], beyond)
                async for note in conn.notifies():
                    self.index.learn(note.payload)
            except Exception as err:  # noqa: BLE001 - the index is an optimisation
                log.warning("response cache index: not listening (%s); every lookup asks "
                            "the table", type(err).__name__)
            finally:
                self.index.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
            await asyncio.sleep(RETRY_AFTER_S)

    def stats(self) -> dict[str, int]:
        return {"errors": self.errors, "skipped": self.skipped, "stored": self.stored,
                "bytes_stored": self.bytes_stored, "absent": self.absent,
                "learned": self.index.learned}

    async def flush(self) -> None:
        while self._writer is not None:
            await asyncio.shield(self._writer)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.flush()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
        await self._reads.drop()
        await self._writes.drop()


class TieredStore:
    """This replica's LRU first, then the table every replica shares."""

    def __init__(self, local: MemoryLRU, shared: PostgresStore) -> None:
        self.local, self.shared = local, shared

    async def get(self, key: str) -> bytes | None:
        value = await self.local.get(key)
        if value is not None:
            return value
        found = await self.shared.get(key)
        if found is None:
            return None
        value, left_s = found
        if left_s > 0:
            self.local.keep(key, value, left_s)
        return value

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        self.local.put(key, value, ttl_s)
        self.shared.put(key, value, ttl_s)

    def stats(self) -> dict[str, int]:
        # the shared store's writes are the stores; the LRU's bytes are what it holds
        local = self.local.stats()
        return self.shared.stats() | {"bytes": local["bytes"], "entries": local["entries"],
                                      "evictions": local["evictions"]}

    async def flush(self) -> None:
        await self.shared.flush()

    async def aclose(self) -> None:
        await self.shared.aclose()
        await self.local.aclose()
