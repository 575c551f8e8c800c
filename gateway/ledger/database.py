"""The ledger writer's one connection to PostgreSQL: a batch in one transaction, or row by row.

A batch of fresh rows goes as one binary COPY straight into `usage_records`: its
statement trigger folds the rollups once, from the COPY's transition table. Should a row
be there already (a batch retried after a commit whose answer was lost), PostgreSQL
refuses the COPY whole and the batch goes the idempotent way: one binary COPY into a
temporary table and one `INSERT ... SELECT ... ON CONFLICT (request_id, started_at) DO
NOTHING`, which spool replays take from the start. The direct COPY saved about 11 µs
of the 30 µs a row cost the staged way (5,000-row batches, issue 29). The COPY yields to
the event loop every hundred rows. How a record becomes a row is `gateway.ledger.rows`.

Kept apart from the writer's buffering, spooling and supervision: this module only says,
for one batch, which rows the database took, which it refused for what they hold, or that
it could not be asked (`TransientDbError`: keep every row and retry).

A write that takes longer than `write_timeout_s` is abandoned (rows kept); psycopg then
spends up to 10 s trying to cancel it on the server before giving up on the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.copy import AsyncWriter
from psycopg.types.json import set_json_dumps

from db.analytics.attribution_sql import CLOSE_KINDS_FUNCTION
from db.engine import libpq_url
from db.partitions.sql import ENSURE_SQL
from gateway.domain import json_codec
from gateway.domain.usage_record import UsageRecord
from gateway.ledger.rows import COLUMNS, COPY_TYPES, TABLE_TYPES, fits_table_types, record_row

log = logging.getLogger(__name__)

TABLE = "usage_records"
STAGING = "usage_records_incoming"

# rows per slice of COPY work between two yields to the event loop (about 1 ms of CPU)
_ROWS_PER_SLICE = 100
# parts of COPY data made ahead (32 kB each) handed to libpq between two yields
_PARTS_PER_SLICE = 8

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
_COPY_DIRECT = sql.SQL("COPY {t} ({c}) FROM STDIN (FORMAT BINARY)").format(
    t=sql.Identifier(TABLE), c=_COLS
)
# the primary key holds the partition key (db/partitions): a replayed row has the
# started_at it was first written with, so this still skips it
_MERGE = sql.SQL(
    "INSERT INTO {t} ({c}) SELECT {c} FROM {s} ON CONFLICT (request_id, started_at) DO NOTHING"
).format(t=sql.Identifier(TABLE), s=sql.Identifier(STAGING), c=_COLS)
_INSERT_ONE = sql.SQL(
    "INSERT INTO {t} ({c}) VALUES ({p}) ON CONFLICT (request_id, started_at) DO NOTHING"
).format(t=sql.Identifier(TABLE), c=_COLS, p=sql.SQL(", ").join(sql.Placeholder() * len(COLUMNS)))

# the database refusing a value: that row's fault, not the database's state. A value of
# the wrong type (a list for an integer) fails as a type mismatch, not as a data error:
# it must not pass for an outage, or that one row would block the ledger for good
_REFUSED_BY_DB = (
    psycopg.errors.IntegrityError,
    psycopg.errors.DataError,
    psycopg.errors.DatatypeMismatch,
    psycopg.errors.CannotCoerce,
)
# the database could not be asked: connection lost or refused, timed out, schema missing
_UNAVAILABLE = (psycopg.Error, OSError)  # TimeoutError is an OSError


def _cannot_encode(err: psycopg.Error) -> bool:
    """psycopg refused to send a value (no server involved): that row's fault."""
    return isinstance(err, psycopg.ProgrammingError) and err.sqlstate is None


# the weekly partitions ahead of now: checked when the writer connects and hourly after,
# on its own connection between batches (never on a request's path); creating a week
# happens once a week, four weeks ahead, so no row waits for it
_ENSURE_PARTITIONS = ENSURE_SQL
# the end users by kind of the days that ended (db.analytics.attribution_sql): one read
# of the state row when there is none; after midnight, one GROUP BY of a day's per-app
# rows (about 13 s per million distinct end users here; a day an hour when several wait)
_CLOSE_DAYS = f"SELECT {CLOSE_KINDS_FUNCTION}(NULL, 1)"
_ENSURE_EVERY_S = 3600.0


class TransientDbError(Exception):
    """The database could not take the batch now; keep the rows and retry."""


class LedgerDatabase:
    def __init__(
        self, database_url: str, *, write_timeout_s: float, connect_timeout_s: int
    ) -> None:
        self._url = libpq_url(database_url)
        self._write_timeout = write_timeout_s
        self._connect_timeout = connect_timeout_s
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._ensured_at = float("-inf")

    async def write(
        self, records: list[UsageRecord], fresh: bool = True, encoded: list[bytes] | None = None
    ) -> list[UsageRecord]:
        """Commit `records`; return the ones refused for their content (not written).
        `fresh`: False for rows that may be in the ledger already (a spool replay), which
        go the staging table's way at once. `encoded`: the rows' COPY data, made ahead by
        `encode` (None: made as the COPY goes).

        Raises TransientDbError when the database could not be asked: no row refused.
        """
        try:
            await self._maintain()
            async with asyncio.timeout(self._write_timeout):
                await self._copy_merge(records, fresh, encoded)
            return []
        except _REFUSED_BY_DB as err:
            log.warning("a batch was refused (%s); writing its rows one by one", type(err).__name__)
        except _UNAVAILABLE as err:
            if not (isinstance(err, psycopg.Error) and _cannot_encode(err)):
                log.warning("ledger flush failed, rows kept for retry: %s", type(err).__name__)
                await self.close()
                raise TransientDbError from err
            log.warning("a value in a batch cannot be sent (%s); row by row", err)
        except Exception as err:  # noqa: BLE001 - a value psycopg cannot send: find the row
            log.warning("a batch could not be encoded (%s); row by row", type(err).__name__)
        return await self._write_row_by_row(records)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

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
            # a row's tags go as jsonb: orjson writes them, not psycopg's default `json`
            # (2 µs a row of the writer's process, the ledger's critical path: issue 29)
            set_json_dumps(json_codec.dumps, context=self._conn)
            await self._conn.execute(_CREATE_STAGING)
        return self._conn

    async def _maintain(self) -> None:
        """Hourly, before a batch and timed apart from it (a day's close must not use up
        the batch's time): the weeks ahead, and the days that ended closed. Maintenance
        only: a failure is logged, the batch goes on (the default partition takes a row
        whose week is missing; the open days are read from the per-app rollup), and the
        next hour retries. No connection: raised, as the batch's own attempt would."""
        now = asyncio.get_running_loop().time()
        if now - self._ensured_at < _ENSURE_EVERY_S:
            return
        async with asyncio.timeout(self._write_timeout):
            conn = await self._connection()
        self._ensured_at = now
        try:
            async with asyncio.timeout(self._write_timeout):
                for statement, what in (
                    (_ENSURE_PARTITIONS, "create the ledger's partitions ahead"),
                    (_CLOSE_DAYS, "close the end users by kind of the days that ended"),
                ):
                    try:
                        await conn.execute(statement)
                    except psycopg.Error as err:
                        log.warning("could not %s: %s", what, type(err).__name__)
        except TimeoutError:
            log.warning("ledger maintenance cut short after %s s", self._write_timeout)
            await self.close()  # the statement cut short leaves the connection unusable

    async def encode(self, records: list[UsageRecord]) -> list[bytes] | None:
        """The direct COPY's data for `records`, in parts of about 32 kB (their tuples,
        without the format's header and trailer), made while this connection may be busy
        with another batch: no I/O. None when it cannot be made here (not connected yet, a
        value psycopg cannot send, an integer past its int4 column): the write then makes
        the rows as it goes, and finds out."""
        conn = self._conn
        if conn is None or conn.closed:
            return None
        sink = _Collected()
        try:
            async with psycopg.AsyncCopy(conn.cursor(), binary=True, writer=sink) as copy:
                copy.set_types(TABLE_TYPES)
                await _write_rows(copy, records, direct=True)
        except Exception:  # noqa: BLE001 - the write meets it again and finds the row
            return None
        parts = sink.parts
        # kept in parts, never joined: a batch is megabytes, and one copy of it would hold
        # the event loop for milliseconds
        if not (
            parts and parts[0].startswith(_BINARY_HEADER) and parts[-1].endswith(_BINARY_TRAILER)
        ):
            return None  # not the format this module splices: let psycopg make the rows
        parts[0] = parts[0][len(_BINARY_HEADER) :]
        parts[-1] = parts[-1][: -len(_BINARY_TRAILER)]
        return [p for p in parts if p]

    async def _copy_merge(
        self, records: list[UsageRecord], fresh: bool, encoded: list[bytes] | None
    ) -> None:
        conn = await self._connection()
        if fresh:
            try:
                async with conn.transaction():
                    if encoded is None:
                        await _copy(conn, _COPY_DIRECT, TABLE_TYPES, records, direct=True)
                    else:
                        await _send(conn, encoded)
                return
            except psycopg.errors.UniqueViolation:
                log.info("a batch holds a row already written; merging it instead")
            except _WouldWrap:
                pass  # the staging table's int8 columns take it, and the INSERT checks it
        async with conn.transaction():
            await _copy(conn, _COPY, COPY_TYPES, records)
            await conn.execute(_MERGE)

    async def _write_row_by_row(self, records: list[UsageRecord]) -> list[UsageRecord]:
        rejected: list[UsageRecord] = []
        try:
            conn = await self._connection()
            async with conn.transaction():
                for r in records:
                    try:
                        async with conn.transaction():  # a savepoint per row
                            await conn.execute(_INSERT_ONE, record_row(r))
                    except _REFUSED_BY_DB:
                        rejected.append(r)
                    except psycopg.Error as err:
                        if not _cannot_encode(err):
                            raise  # the connection's state, not this row's: retry it all
                        rejected.append(r)
                    except Exception:  # noqa: BLE001 - this row cannot be a row at all
                        rejected.append(r)
        except _UNAVAILABLE as err:
            await self.close()
            raise TransientDbError from err
        return rejected


# PostgreSQL's binary COPY format: the signature, no flags, no header extension; and the
# end marker (a tuple of -1 fields)
_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_BINARY_TRAILER = b"\xff\xff"


class _Collected(AsyncWriter):
    """Where an offline COPY puts its data (psycopg's documented way to make COPY data
    without sending it: `AsyncCopy(..., writer=...)`)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    async def write(self, data: Buffer) -> None:
        self.parts.append(bytes(data))


async def _send(conn: psycopg.AsyncConnection[Any], encoded: list[bytes]) -> None:
    """The direct COPY of rows made ahead: their parts between one header and trailer."""
    async with conn.cursor().copy(_COPY_DIRECT) as copy:
        await copy.write(_BINARY_HEADER)
        for i, part in enumerate(encoded, 1):
            await copy.write(part)
            if i % _PARTS_PER_SLICE == 0:
                await asyncio.sleep(0)  # libpq takes them without waiting: let others run
        await copy.write(_BINARY_TRAILER)


class _WouldWrap(Exception):
    """A row holds an integer its int4 column cannot: not for the direct COPY."""


async def _copy(
    conn: psycopg.AsyncConnection[Any],
    statement: sql.Composed,
    types: list[str],
    records: list[UsageRecord],
    *,
    direct: bool = False,
) -> None:
    """COPY `records`, each made a row as it goes: the server inserts the rows already
    sent while this process makes the next ones. Made all before the COPY, a batch's rows
    kept the lane's backend idle for a fifth of its time (issue 29, docs/ROLLUPS.md)."""
    async with conn.cursor().copy(statement) as copy:
        copy.set_types(types)
        await _write_rows(copy, records, direct=direct)


async def _write_rows(copy: psycopg.AsyncCopy, records: list[UsageRecord], *, direct: bool) -> None:
    """Each record made a row and written to `copy`; `direct`: into usage_records' own
    types, so a row whose integer does not fit them raises _WouldWrap (leaving the COPY's
    block aborts it, and its transaction)."""
    for i, r in enumerate(records, 1):
        row = record_row(r)
        if direct and not fits_table_types(row):
            raise _WouldWrap
        await copy.write_row(row)
        if i % _ROWS_PER_SLICE == 0:
            await asyncio.sleep(0)  # a request waiting on this loop goes first
