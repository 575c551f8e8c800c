"""The ledger's writer: usage records leave the request path here and reach PostgreSQL.

It exists so that recording usage costs a request nothing: `submit()` only appends to an
in-memory buffer, and a background task on the replica's event loop flushes it when
`batch_size` rows are waiting or every `flush_interval_s`, taking up to `max_batch` rows
per transaction: one binary COPY into a temporary table and one
`INSERT ... SELECT ... ON CONFLICT (request_id) DO NOTHING`, so a retried flush never
duplicates a row. A request never waits on the database, and the COPY yields to the
event loop every hundred rows. How a record becomes a row is `gateway.ledger.rows`.

When PostgreSQL is slow or away, rows stay in memory and the flush retries with
exponential backoff. Past `max_buffer` rows, new records go to the local-disk spool
(`gateway.ledger.spool`). Once the database answers again, and the memory buffer is
drained, the spool is replayed batch by batch, including the files of writers that died
(or were closed while the database was away) on the same spool directory: adopted at
start and looked for every 30 s. `close()` flushes what it can within its timeout and
spools the rest.

A write that takes longer than `write_timeout_s` is abandoned (rows kept); psycopg then
spends up to 10 s trying to cancel it on the server before giving up on the connection.

Rows the database rejects for their content (a constraint or data error) are isolated
row by row; the rejected ones go to `usage-rejected-*.jsonl` and are counted as dropped.
Any other error (connection lost, schema not migrated yet) keeps the rows and retries.

Counters (`stats()`): queued (accepted by submit), written (committed, including
replayed ones and ones already present), spooled (appended to a spool file), replayed
(committed from a spool file), dropped (lost: spool unwritable, corrupt spool line,
rejected by the database), flush_errors (failed flush attempts), adopted (lines taken
over from other writers' spool files), buffer_depth (rows in memory), spool_depth (rows
in spool files not yet replayed). When idle:
queued + adopted = written + dropped + buffer_depth + spool_depth.

Call `submit()` from the event loop thread the writer was started on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from db.engine import libpq_url
from gateway.domain.usage_record import UsageRecord
from gateway.ledger.rows import COLUMNS, COPY_TYPES, record_row
from gateway.ledger.spool import Spool, read_batch

log = logging.getLogger(__name__)

TABLE = "usage_records"
STAGING = "usage_records_incoming"

# rows per slice of COPY work between two yields to the event loop (about 1 ms of CPU)
_ROWS_PER_SLICE = 100

_COLS = sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
# no constraints here: they are checked once, by the INSERT into usage_records
_CREATE_STAGING = sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {s} ({d}) ON COMMIT DELETE ROWS").format(
    s=sql.Identifier(STAGING),
    d=sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
        for c, t in zip(COLUMNS, COPY_TYPES, strict=True)
    ),
)
_COPY = sql.SQL("COPY {s} ({c}) FROM STDIN (FORMAT BINARY)").format(
    s=sql.Identifier(STAGING), c=_COLS
)
_MERGE = sql.SQL(
    "INSERT INTO {t} ({c}) SELECT {c} FROM {s} ON CONFLICT (request_id) DO NOTHING"
).format(t=sql.Identifier(TABLE), s=sql.Identifier(STAGING), c=_COLS)
_INSERT_ONE = sql.SQL(
    "INSERT INTO {t} ({c}) VALUES ({p}) ON CONFLICT (request_id) DO NOTHING"
).format(
    t=sql.Identifier(TABLE), c=_COLS, p=sql.SQL(", ").join(sql.Placeholder() * len(COLUMNS))
)

# a batch (or a row) refused for what it holds, not for the database's state: the
# database's own checks, or a value psycopg cannot send as its column's type
_REFUSED = (
    psycopg.errors.IntegrityError,
    psycopg.errors.DataError,
    TypeError,
    ValueError,
    OverflowError,
)


class _TransientDbError(Exception):
    """The database could not take the batch now; keep the rows and retry."""


class RecordWriter:
    def __init__(
        self,
        database_url: str,
        *,
        spool_dir: Path,
        batch_size: int = 500,
        flush_interval_s: float = 0.5,
        max_buffer: int = 20_000,
        max_batch: int = 5_000,
        retry_initial_s: float = 0.1,
        retry_max_s: float = 5.0,
        write_timeout_s: float = 30.0,
        connect_timeout_s: int = 5,
    ) -> None:
        if not 1 <= batch_size <= max_buffer:
            raise ValueError("need 1 <= batch_size <= max_buffer")
        # a flush takes whatever piled up while the previous one ran, up to max_batch:
        # bigger transactions when the database lags, which is when they pay
        self._max_batch = max(batch_size, max_batch)
        self._url = libpq_url(database_url)
        self._spool = Spool(Path(spool_dir))
        self._batch_size = batch_size
        self._interval = flush_interval_s
        self._max_buffer = max_buffer
        self._retry_initial = retry_initial_s
        self._retry_max = retry_max_s
        self._write_timeout = write_timeout_s
        self._connect_timeout = connect_timeout_s

        self._buffer: collections.deque[UsageRecord] = collections.deque()
        self._inflight: list[UsageRecord] = []
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._closed = False
        self._deadline = float("inf")
        self._counts = dict.fromkeys(
            ("queued", "written", "spooled", "replayed", "dropped", "flush_errors"), 0
        )

    # -- the request path's side ------------------------------------------------------

    def submit(self, record: UsageRecord) -> None:
        """Queue one record. Never raises, never blocks on the database."""
        try:
            self._counts["queued"] += 1
            if self._closed or len(self._buffer) >= self._max_buffer:
                self._to_spool([record])
                return
            self._buffer.append(record)
            if len(self._buffer) >= self._batch_size and self._wake is not None:
                self._wake.set()
        except Exception:  # a record must never break the request that made it
            log.exception("usage record could not be queued")
            self._counts["dropped"] += 1

    def stats(self) -> dict[str, int]:
        return {
            **self._counts,
            "adopted": self._spool.adopted,
            "buffer_depth": len(self._buffer) + len(self._inflight),
            "spool_depth": self._spool.depth,
        }

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the flush task on the running loop; adopt spool files left by dead writers.

        Does not connect: a database that is down at start-up only delays the first flush.
        """
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        self._spool.open()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="record-writer")

    async def close(self, timeout_s: float = 10.0) -> None:
        """Flush what the database takes within `timeout_s`; spool the rest."""
        if self._closed:
            return
        self._closing = True
        self._deadline = time.monotonic() + timeout_s
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
            except Exception:  # the timeout, or a bug: either way spool what is left
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        self._closed = True
        # whatever did not reach the database (an interrupted batch may have: idempotent)
        leftovers = self._inflight + list(self._buffer)
        self._inflight = []
        self._buffer.clear()
        if leftovers:
            self._to_spool(leftovers)
        self._spool.close_file()
        await self._disconnect()
        self._spool.release()

    # -- the flush loop -----------------------------------------------------------------

    async def _run(self) -> None:
        assert self._wake is not None
        backoff = self._retry_initial
        while True:
            if not self._closing and len(self._buffer) < self._batch_size:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._interval)
            self._wake.clear()
            self._spool.flush()
            ok = await self._drain()
            if self._closing and (ok or time.monotonic() >= self._deadline):
                return
            if ok:
                backoff = self._retry_initial
                if not self._closing:
                    await self._replay_some()
                continue
            # jittered so replicas do not hammer a recovering server in step
            delay = min(backoff, max(0.0, self._deadline - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay * random.uniform(0.5, 1.0))
            backoff = min(backoff * 2, self._retry_max)

    async def _drain(self) -> bool:
        """Write the buffer batch by batch; False (rows kept) when the database fails."""
        while self._buffer:
            n = min(self._max_batch, len(self._buffer))
            self._inflight = [self._buffer.popleft() for _ in range(n)]
            try:
                self._counts["written"] += await self._write(self._inflight)
            except _TransientDbError:
                self._buffer.extendleft(reversed(self._inflight))
                self._inflight = []
                return False
            self._inflight = []
            await asyncio.sleep(0)  # let the request path run between batches
        return True

    async def _write(self, records: list[UsageRecord]) -> int:
        """Commit `records`; return how many the database accepted (the rest are rejected)."""
        try:
            await asyncio.wait_for(self._copy_merge(records), self._write_timeout)
            return len(records)
        except _REFUSED as err:
            log.warning("a batch was refused (%s); writing its rows one by one", type(err).__name__)
            return await self._write_row_by_row(records)
        except (psycopg.Error, OSError, TimeoutError) as err:
            self._counts["flush_errors"] += 1
            log.warning("ledger flush failed, rows kept for retry: %s", type(err).__name__)
            await self._disconnect()
            raise _TransientDbError from err

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await psycopg.AsyncConnection.connect(
                self._url,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name="costgate-record-writer",
                # a server that vanished from the network (no FIN, no RST) is noticed by
                # the kernel instead of a socket waiting for hours (TCP only)
                keepalives=1,
                keepalives_idle=10,
                keepalives_interval=5,
                keepalives_count=3,
                tcp_user_timeout=int(self._write_timeout * 1000),
            )
            await self._conn.execute(_CREATE_STAGING)
        return self._conn

    async def _copy_merge(self, records: list[UsageRecord]) -> None:
        conn = await self._connection()
        async with conn.transaction():
            cur = conn.cursor()
            async with cur.copy(_COPY) as copy:
                copy.set_types(COPY_TYPES)
                for i, r in enumerate(records, 1):
                    await copy.write_row(record_row(r))
                    if i % _ROWS_PER_SLICE == 0:
                        await asyncio.sleep(0)  # a request waiting on this loop goes first
            await cur.execute(_MERGE)

    async def _write_row_by_row(self, records: list[UsageRecord]) -> int:
        rejected: list[UsageRecord] = []
        try:
            conn = await self._connection()
            async with conn.transaction():
                for r in records:
                    try:
                        async with conn.transaction():  # a savepoint per row
                            await conn.execute(_INSERT_ONE, record_row(r))
                    except _REFUSED:
                        rejected.append(r)
        except (psycopg.Error, OSError) as err:
            self._counts["flush_errors"] += 1
            await self._disconnect()
            raise _TransientDbError from err
        if rejected:
            log.error("%d usage records rejected by the database", len(rejected))
            self._counts["dropped"] += len(rejected)
            self._spool.keep_rejected(rejected)
        return len(records) - len(rejected)

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    # -- the spool ----------------------------------------------------------------------

    def _to_spool(self, records: Iterable[UsageRecord]) -> None:
        records = list(records)
        try:
            # after close() no flush loop is left to push the file's buffer to disk
            self._spool.append(records, flush=self._closed)
        except (OSError, TypeError, ValueError):
            log.exception("cannot spool %d usage records: they are lost", len(records))
            self._counts["dropped"] += len(records)
            return
        self._counts["spooled"] += len(records)

    async def _replay_some(self) -> None:
        """Replay one batch from the spool, if any: called only while the database works."""
        current = self._spool.next_replay()
        if current is None:
            return
        # parsing a batch of JSON lines takes milliseconds: off the event loop
        records, end, corrupt = await asyncio.to_thread(
            read_batch, current.path, current.offset, self._batch_size
        )
        if records:
            try:
                accepted = await self._write(records)
            except _TransientDbError:
                return  # read again from the same offset next time
            self._counts["written"] += accepted
            self._counts["replayed"] += accepted
        if corrupt:
            log.error("%d corrupt lines in %s: skipped", corrupt, current.path.name)
            self._counts["dropped"] += corrupt
        self._spool.advance(current, end, len(records) + corrupt)
        if self._wake is not None:
            self._wake.set()  # keep going without waiting a whole interval
