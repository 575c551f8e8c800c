"""The ledger's writer: usage records leave the request path here and reach PostgreSQL.

`submit()` only appends to an in-memory buffer; a background task on the replica's event
loop flushes it when `batch_size` rows are waiting or every `flush_interval_s`, taking up
to `max_batch` rows per transaction: one binary COPY into a temporary table and one
`INSERT ... SELECT ... ON CONFLICT (request_id) DO NOTHING`, so a retried flush never
duplicates a row. A request never waits on the database, and the COPY yields to the
event loop every hundred rows.

When PostgreSQL is slow or away, rows stay in memory and the flush retries with
exponential backoff. Past `max_buffer` rows, new records are appended to a local
append-only spool file (JSON lines, `UsageRecord.to_json`). Once the database answers
again, and the memory buffer is drained, the spool is rotated (renamed, so appends go to a
fresh file) and replayed batch by batch, then deleted. Spool files left by a process that
died (or by a writer closed while the database was away) are adopted and replayed by the
next writer started on the same spool directory, or by a running one (it looks every 30 s):
replicas can share one spool directory, since file names carry the owner's pid and
claiming a file is an atomic rename. `close()` flushes what it can within its timeout and
spools the rest.

A write that takes longer than `write_timeout_s` is abandoned (rows kept); psycopg then
spends up to 10 s trying to cancel it on the server before giving up on the connection.

Rows the database rejects for their content (a constraint or data error) are isolated
row by row; the rejected ones go to `usage-rejected-*.jsonl` and are counted as dropped.
Any other error (connection lost, schema not migrated yet) keeps the rows and retries.

Counters (`stats()`): queued (accepted by submit), written (committed, including
replayed ones and ones already present), spooled (appended to a spool file), replayed
(committed from a spool file), dropped (lost: spool unwritable, corrupt spool line,
rejected by the database), flush_errors (failed flush attempts), buffer_depth (rows in
memory), spool_depth (rows in spool files not yet replayed). When idle:
queued + adopted = written + dropped + buffer_depth + spool_depth.

Call `submit()` from the event loop thread the writer was started on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import logging
import operator
import os
import random
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import psycopg
from psycopg import sql

from db.engine import libpq_url
from gateway.domain.usage_record import UsageRecord

log = logging.getLogger(__name__)

TABLE = "usage_records"
STAGING = "usage_records_incoming"
COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(UsageRecord))

SPOOL_PREFIX = "usage-spool-"
REPLAY_PREFIX = "usage-replay-"
REJECTED_PREFIX = "usage-rejected-"

ORPHAN_SCAN_INTERVAL_S = 30.0

# writers alive in this process, by token: their spool files are not orphans
_LIVE_TOKENS: set[str] = set()

_GET_COLUMNS = operator.attrgetter(*COLUMNS)
_ENUM_COLUMNS = tuple(COLUMNS.index(c) for c in ("status", "usage_source"))
_FALLBACK_PATH = COLUMNS.index("fallback_path")
# rows per slice of COPY work between two yields to the event loop (about 1 ms of CPU)
_ROWS_PER_SLICE = 100


def record_row(r: UsageRecord) -> list[Any]:
    """A record as column values. Enums go as their values (psycopg would send names)."""
    row = list(_GET_COLUMNS(r))
    for i in _ENUM_COLUMNS:
        if isinstance(row[i], enum.Enum):
            row[i] = row[i].value
    row[_FALLBACK_PATH] = list(row[_FALLBACK_PATH])
    return row


def _copy_types() -> list[str]:
    """PostgreSQL type names of the columns, from the model, for binary COPY."""
    from sqlalchemy import ARRAY, Boolean, DateTime, Integer, Numeric, Text, Uuid

    from db.models import UsageRow

    names = [
        (ARRAY, "text[]"),
        (Uuid, "uuid"),
        (DateTime, "timestamptz"),
        (Numeric, "numeric"),
        (Integer, "int4"),
        (Boolean, "bool"),
        (Text, "text"),
    ]
    table = UsageRow.__table__
    return [
        next(pg for sa_type, pg in names if isinstance(table.c[c].type, sa_type)) for c in COLUMNS
    ]


# psycopg's binary int4 dumper wraps values past 2^31 silently, while its int8 one raises:
# integers travel as int8 into the staging table, and the server's range check on the
# INSERT into the int4 columns rejects what does not fit.
COPY_TYPES = [("int8" if t == "int4" else t) for t in _copy_types()]

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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(path: Path) -> tuple[int, str] | None:
    """(pid, token) from `usage-spool-<pid>-<token>.jsonl` / `usage-replay-<pid>-<token>...`."""
    parts = path.stem.split("-")
    try:
        return int(parts[2]), parts[3]
    except (IndexError, ValueError):
        return None


@dataclasses.dataclass
class _ReplayFile:
    path: Path
    lines: int  # not yet replayed
    offset: int = 0  # bytes already replayed


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
        self._spool_dir = Path(spool_dir)
        self._batch_size = batch_size
        self._interval = flush_interval_s
        self._max_buffer = max_buffer
        self._retry_initial = retry_initial_s
        self._retry_max = retry_max_s
        self._write_timeout = write_timeout_s
        self._connect_timeout = connect_timeout_s

        self._token = uuid.uuid4().hex[:12]
        self._buffer: collections.deque[UsageRecord] = collections.deque()
        self._inflight: list[UsageRecord] = []
        self._spool_file: IO[str] | None = None
        self._spool_path = self._spool_dir / f"{SPOOL_PREFIX}{os.getpid()}-{self._token}.jsonl"
        self._spool_lines = 0  # lines in the active spool file
        self._replays: collections.deque[_ReplayFile] = collections.deque()
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._closed = False
        self._deadline = float("inf")
        self._next_orphan_scan = time.monotonic() + ORPHAN_SCAN_INTERVAL_S
        self._counts = dict.fromkeys(
            ("queued", "written", "spooled", "replayed", "dropped", "flush_errors", "adopted"), 0
        )

    # -- the request path's side ------------------------------------------------------

    def submit(self, record: UsageRecord) -> None:
        """Queue one record. Never raises, never blocks on the database."""
        try:
            self._counts["queued"] += 1
            if self._closed or len(self._buffer) >= self._max_buffer:
                self._spool([record])
                return
            self._buffer.append(record)
            if len(self._buffer) >= self._batch_size and self._wake is not None:
                self._wake.set()
        except Exception:  # a record must never break the request that made it
            log.exception("usage record could not be queued")
            self._counts["dropped"] += 1

    def stats(self) -> dict[str, int]:
        pending = sum(r.lines for r in self._replays)
        return {
            **self._counts,
            "buffer_depth": len(self._buffer) + len(self._inflight),
            "spool_depth": self._spool_lines + pending,
        }

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the flush task on the running loop; adopt spool files left by dead writers.

        Does not connect: a database that is down at start-up only delays the first flush.
        """
        if self._task is not None:
            return
        _LIVE_TOKENS.add(self._token)
        self._wake = asyncio.Event()
        try:
            self._spool_dir.mkdir(parents=True, exist_ok=True)
            self._adopt_orphans()
        except OSError:
            log.exception("cannot use the spool directory %s", self._spool_dir)
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
            self._spool(leftovers)
        self._close_spool_file()
        await self._disconnect()
        _LIVE_TOKENS.discard(self._token)

    # -- the flush loop -----------------------------------------------------------------

    async def _run(self) -> None:
        assert self._wake is not None
        backoff = self._retry_initial
        while True:
            if not self._closing and len(self._buffer) < self._batch_size:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._interval)
            self._wake.clear()
            self._flush_spool_file()
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
            self._append_lines(
                self._spool_dir / f"{REJECTED_PREFIX}{os.getpid()}-{self._token}.jsonl",
                rejected,
            )
        return len(records) - len(rejected)

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    # -- the spool ----------------------------------------------------------------------

    def _spool(self, records: Iterable[UsageRecord]) -> None:
        records = list(records)
        try:
            if self._spool_file is None:
                self._spool_dir.mkdir(parents=True, exist_ok=True)
                self._spool_file = open(self._spool_path, "a", encoding="utf-8")  # noqa: SIM115
            self._spool_file.writelines(r.to_json() + "\n" for r in records)
            if self._closed:
                self._spool_file.flush()
        except (OSError, TypeError, ValueError):
            log.exception("cannot spool %d usage records: they are lost", len(records))
            self._counts["dropped"] += len(records)
            return
        self._spool_lines += len(records)
        self._counts["spooled"] += len(records)

    def _append_lines(self, path: Path, records: list[UsageRecord]) -> None:
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.writelines(r.to_json() + "\n" for r in records)
        except OSError:
            log.exception("cannot keep rejected records in %s", path)

    def _flush_spool_file(self) -> None:
        if self._spool_file is not None:
            try:
                self._spool_file.flush()
            except OSError:
                log.exception("cannot flush the spool file")

    def _close_spool_file(self) -> None:
        f, self._spool_file = self._spool_file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _claim(self, path: Path, lines: int | None = None) -> None:
        """Rename a spool file to a replay file of ours (atomic: one claimer wins)."""
        name = f"{REPLAY_PREFIX}{os.getpid()}-{self._token}-{uuid.uuid4().hex[:8]}.jsonl"
        target = self._spool_dir / name
        try:
            path.rename(target)
        except FileNotFoundError:
            return  # another writer claimed it first
        if lines is None:
            with open(target, "rb") as f:
                lines = sum(1 for _ in f)
            self._counts["adopted"] += lines
        self._replays.append(_ReplayFile(target, lines))

    def _adopt_orphans(self) -> None:
        for path in sorted(self._spool_dir.glob("usage-*.jsonl")):
            if not path.name.startswith((SPOOL_PREFIX, REPLAY_PREFIX)):
                continue
            owner = _owner(path)
            if owner is None:
                continue
            pid, token = owner
            alive = pid == os.getpid() and token in _LIVE_TOKENS
            if alive or (pid != os.getpid() and _pid_alive(pid)):
                continue
            self._claim(path)

    async def _replay_some(self) -> None:
        """Replay one batch from the spool, if any: called only while the database works."""
        if not self._replays and self._spool_lines:
            self._close_spool_file()
            lines, self._spool_lines = self._spool_lines, 0
            self._claim(self._spool_path, lines)
        if not self._replays and time.monotonic() >= self._next_orphan_scan:
            # a sibling replica that died after we started left its spool behind
            self._next_orphan_scan = time.monotonic() + ORPHAN_SCAN_INTERVAL_S
            with contextlib.suppress(OSError):
                self._adopt_orphans()
        if not self._replays:
            return
        current = self._replays[0]
        # parsing a batch of JSON lines takes milliseconds: off the event loop
        records, end, corrupt = await asyncio.to_thread(
            _read_batch, current.path, current.offset, self._batch_size
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
        current.offset = end
        current.lines = max(0, current.lines - len(records) - corrupt)
        if not records and not corrupt:  # end of file
            with contextlib.suppress(OSError):
                current.path.unlink()
            self._replays.popleft()
        if self._wake is not None:
            self._wake.set()  # keep going without waiting a whole interval


def _read_batch(path: Path, offset: int, limit: int) -> tuple[list[UsageRecord], int, int]:
    """Up to `limit` records from byte `offset`: (records, next offset, corrupt lines)."""
    records: list[UsageRecord] = []
    corrupt = 0
    with open(path, "rb") as f:
        f.seek(offset)
        while len(records) < limit:
            line = f.readline()
            if not line:
                break
            if not line.endswith(b"\n"):
                # a torn last line, left by a crash mid-append
                corrupt += 1
                offset = f.tell()
                break
            offset = f.tell()
            if not line.strip():
                continue
            try:
                records.append(UsageRecord.from_json(line.decode("utf-8")))
            except (ValueError, TypeError, KeyError):
                corrupt += 1
    return records, offset, corrupt
