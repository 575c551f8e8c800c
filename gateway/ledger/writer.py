"""The ledger's writer: usage records leave the request path here and reach PostgreSQL.

`submit()` appends to a buffer in memory and to the journal (`gateway.ledger.journal`:
one write(2), so a killed process or node loses no answered row). Two supervised loops
on the replica's event loop (`gateway.ledger.supervisor`) do the rest:

- the database loop flushes the buffer every `flush_interval_s` or at `batch_size` rows,
  up to `max_batch` rows per transaction (`gateway.ledger.database`), up to one batch per
  connection at once (`gateway.ledger.lanes`), then replays the spool batch by batch;
  when the database fails it retries with jittered backoff.
- the spool loop moves the buffer to the local-disk spool (`gateway.ledger.spool`) once
  the database is failing (one failed flush) or hangs (a write in flight for longer than
  `spool_after_s`, a flush interval by default, and than 4 times what writes of its size
  took lately: a hung server fails a write only after `write_timeout_s`), or memory is
  SPILL_FRACTION full. An outage so leaves about one flush interval of rows in memory,
  not `max_buffer`. It adopts dead writers' spool files, and tends the journal.

At most `max_buffer` rows are held in memory (buffer, in flight, being spooled). A failed
spool write (disk full, I/O error) keeps its rows in memory, retried every interval;
past the bound, new records are dropped, counted. `close()` flushes what the
database takes within its timeout and spools the rest. Rows the database refuses for
their content go to `usage-rejected-*.jsonl`, counted as dropped.

Counters (`stats()`): queued, written (committed, replayed and already present ones
included), spooled (durably appended), replayed, dropped (lost), quarantined (spool
lines that were not records, set aside), flush_errors, spool_write_errors, restarts,
adopted (lines of other writers' files), buffer_depth (rows in memory), spool_depth
(rows in spool files), journaled, journal_errors. When idle:
queued + adopted = written + dropped + quarantined + buffer_depth + spool_depth.
`health()`: alive, ready and why not (`gateway.ledger.health`). Call `submit()` from the
event loop thread the writer was started on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time
from pathlib import Path

from gateway.concurrency.waits import cancel_until_done, wait_event
from gateway.domain.usage_record import UsageRecord
from gateway.ledger.database import LedgerDatabase, TransientDbError
from gateway.ledger.health import WriterHealth
from gateway.ledger.journal import Journal
from gateway.ledger.lanes import Lanes
from gateway.ledger.spill import Spiller
from gateway.ledger.spool import Spool
from gateway.ledger.supervisor import Supervisor

log = logging.getLogger(__name__)

# memory this full spills to disk even while the database keeps up, so that a burst is
# spooled, not dropped at the bound
SPILL_FRACTION = 0.75


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
        spool_after_s: float | None = None,
        stall_after_s: float | None = None,
        connections: int = 2,
    ) -> None:
        if not 1 <= batch_size <= max_buffer:
            raise ValueError("need 1 <= batch_size <= max_buffer")
        # a flush takes whatever piled up while the previous one ran, up to max_batch:
        # bigger transactions when the database lags, which is when they pay
        self._max_batch = max(batch_size, max_batch)
        # batches side by side, each on its own connection (gateway.ledger.lanes)
        self._lanes = Lanes(
            lambda: LedgerDatabase(
                database_url, write_timeout_s=write_timeout_s, connect_timeout_s=connect_timeout_s
            ),
            connections,
        )
        self._spool = Spool(Path(spool_dir))
        self._spiller = Spiller(self._spool)
        self._journal = Journal(Path(spool_dir))
        self._batch_size = batch_size
        self._interval = flush_interval_s
        self._max_buffer = max_buffer
        self._retry_initial = retry_initial_s
        self._retry_max = retry_max_s
        self._spool_after = flush_interval_s if spool_after_s is None else spool_after_s
        self._spill_mark = int(max_buffer * SPILL_FRACTION)
        self._loops = Supervisor(
            # a healthy loop beats at least once per database attempt, whose worst case
            # is the write timeout plus psycopg's 10 s of cancelling it: twice that stalls
            stall_after_s=stall_after_s or 2 * (write_timeout_s + 10) + 10,
            retry_initial_s=retry_initial_s,
            retry_max_s=retry_max_s,
        )
        self._started = False

        self._buffer: collections.deque[UsageRecord] = collections.deque()
        # the writes in flight: when each started, and its rows
        self._writes: dict[object, tuple[float, int]] = {}
        # what a write took per row lately: a big batch on a busy server takes longer than
        # a flush interval (5,000 rows: about 0.5 s here) without the server hanging
        self._s_per_row = 0.0
        self._database_ok = True
        self._warned_at = float("-inf")
        self._wake: asyncio.Event | None = None  # the database loop
        self._spool_wake: asyncio.Event | None = None
        self._closing = False
        self._stopping = False  # the spool loop's cue to return
        self._closed = False
        self._deadline = float("inf")
        self._counts = dict.fromkeys(
            ("queued", "written", "replayed", "dropped", "flush_errors"), 0
        )

    # -- the request path's side ------------------------------------------------------

    def submit(self, record: UsageRecord) -> None:
        """Queue one record. Never raises, never blocks on the database or the disk."""
        try:
            self._counts["queued"] += 1
            if self._closed:
                self._spiller.spill_now([record])
                return
            if self._held() >= self._max_buffer:
                self._counts["dropped"] += 1
                if time.monotonic() - self._warned_at >= 60:  # not a line per request
                    self._warned_at = time.monotonic()
                    log.warning("usage records dropped: %d rows held in memory", self._held())
                return
            self._journal.append(record)
            self._buffer.append(record)
            if len(self._buffer) >= self._batch_size and self._spool_wake is not None:
                if self._database_ok:
                    self._wake_db()
                if self._should_spool():
                    self._spool_wake.set()
        except Exception:  # a record must never break the request that made it
            log.exception("usage record could not be queued")
            self._counts["dropped"] += 1

    def _held(self) -> int:
        return len(self._buffer) + self._lanes.held() + self._spiller.held

    def _held_rows(self) -> list[UsageRecord]:
        return [*self._buffer, *self._lanes.held_rows(), *self._spiller.held_records]

    def stats(self) -> dict[str, int]:
        return {
            **self._counts,
            "dropped": self._counts["dropped"] + self._spool.lost + self._spiller.dropped,
            "spooled": self._spiller.spooled,
            "spool_write_errors": self._spiller.write_errors,
            "restarts": self._loops.restarts,
            "quarantined": self._spool.quarantined,
            "adopted": self._spool.adopted,
            "buffer_depth": self._held(),
            "spool_depth": self._spool.depth,
            "journaled": self._journal.appended,
            "journal_errors": self._journal.errors,
        }

    def health(self) -> WriterHealth:
        if not self._started:
            problems = ["record writer not started"]
        elif self._closed:
            problems = ["record writer closed"]
        else:
            problems = self._loops.problems()
        alive = not problems
        if not self._spool.writable:
            problems.append(f"spool not writable: {self._spool.last_error}")
        s = self.stats()
        return WriterHealth(
            alive=alive,
            problems=tuple(problems),
            database_ok=self._database_ok,
            spool_writable=self._spool.writable,
            spool_error_kind=(self._spool.last_error or "").split(":")[0] or None,
            restarts=s["restarts"],
            buffer_depth=s["buffer_depth"],
            spool_depth=s["spool_depth"],
            quarantined=s["quarantined"],
            spool_write_errors=s["spool_write_errors"],
            dropped=s["dropped"],
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Open the spool, adopt what dead writers left in it, start both loops.

        Does not connect: a database that is down at start-up only delays the first flush.
        """
        if self._started:
            return
        self._started = True
        self._wake, self._spool_wake = asyncio.Event(), asyncio.Event()
        await asyncio.to_thread(self._spool.open)
        await asyncio.to_thread(self._journal.open)

        def closed() -> bool:
            return self._closing and time.monotonic() >= self._deadline

        self._loops.start("database", self._db_loop, self._recover_db, give_up=closed)
        self._loops.start("spool", self._spool_loop, give_up=closed)

    async def close(self, timeout_s: float = 10.0, stranded_s: float = 0.0) -> None:
        """Flush what the database takes within `timeout_s`; spool the rest.

        Rows that neither took (the database away and the disk full or failing) are tried
        on both, every second, for `stranded_s` more before they count as dropped: the
        last chance to keep rows of requests that were answered.
        """
        if self._closed:
            return
        self._closing = True
        self._deadline = time.monotonic() + timeout_s
        for event in (self._wake, self._spool_wake):
            if event is not None:
                event.set()
        db_task = self._loops.task("database")
        if db_task is not None:
            await asyncio.wait({db_task}, timeout=timeout_s)
            await cancel_until_done(db_task)  # out of time: spool what is left
        self._stopping = True
        spool_task = self._loops.task("spool")
        if spool_task is not None:
            await cancel_until_done(spool_task)
        # an append's thread runs on after its task is cancelled: whether its rows are on
        # disk or back in the buffer is known once it returns
        await self._spiller.finish(max(1.0, self._deadline - time.monotonic()))
        self._closed = True
        # whatever did not reach the database (an interrupted batch may have: idempotent)
        leftovers = self._lanes.take_all() + list(self._buffer)
        self._buffer.clear()
        if leftovers:
            await self._lanes.close()  # a cancelled flush left them in an unknown state
            until = time.monotonic() + stranded_s
            rescued = await self._spiller.rescue(leftovers, self._write_first, until)
            self._counts["written"] += rescued
        # every row is committed, spooled or counted as dropped: the journal is done
        await asyncio.to_thread(Journal.delete, self._journal.close_all())
        await asyncio.to_thread(self._spool.close)
        await self._lanes.close()

    # -- supervision --------------------------------------------------------------------

    async def _recover_db(self) -> None:
        self._buffer.extendleft(reversed(self._lanes.take_all()))
        self._writes.clear()
        await self._lanes.close()  # their state mid-transaction is unknown

    # -- the database loop --------------------------------------------------------------

    async def _db_loop(self) -> None:
        assert self._wake is not None and self._spool_wake is not None
        backoff = self._retry_initial
        while True:
            self._loops.beat("database")
            if not self._closing and len(self._buffer) < self._batch_size:
                await wait_event(self._wake, self._interval)
            self._wake.clear()
            ok = await self._drain()
            if ok and not self._closing:
                ok = await self._replay_some()
            self._database_ok = ok
            self._loops.completed("database")
            if self._closing and (not self._buffer or time.monotonic() >= self._deadline):
                return  # flushed (or all of it spooled), or out of time
            if ok:
                backoff = self._retry_initial
                continue
            self._spool_wake.set()  # the rows that failed go to disk now
            # jittered so replicas do not hammer a recovering server in step
            delay = min(backoff, max(0.0, self._deadline - time.monotonic()))
            await wait_event(self._wake, delay * random.uniform(0.5, 1.0))
            backoff = min(backoff * 2, self._retry_max)

    async def _drain(self) -> bool:
        """Write the buffer batch by batch; False (rows kept) when the database fails."""
        assert self._wake is not None
        return await self._lanes.drain(
            self._buffer,
            self._write,
            self._accepted,
            max_batch=self._max_batch,
            min_batch=self._batch_size,
            wake=self._wake,
        )

    async def _write_first(self, records: list[UsageRecord]) -> int:
        return await self._write(None, records)

    def _accepted(self, rows: int) -> None:
        self._counts["written"] += rows
        self._loops.beat("database")

    async def _write(
        self, db: LedgerDatabase | None, records: list[UsageRecord],
        encoded: list[bytes] | None = None, *, fresh: bool = True,
    ) -> int:  # fmt: skip
        """Commit `records` on `db` (None: the first lane's); return how many the database
        accepted (the rest are rejected). `encoded`: their COPY data, if made ahead.
        `fresh`: False for rows that may be in the ledger already (spool replays)."""
        started, token = time.monotonic(), object()
        self._writes[token] = (started, len(records))
        try:
            rejected = await (db or self._lanes.first).write(records, fresh, encoded)
        except TransientDbError:
            self._counts["flush_errors"] += 1
            raise
        finally:
            self._writes.pop(token, None)
        per_row = (time.monotonic() - started) / len(records)
        self._s_per_row = 0.8 * self._s_per_row + 0.2 * per_row if self._s_per_row else per_row
        if rejected:
            log.error("%d usage records rejected by the database", len(rejected))
            self._counts["dropped"] += len(rejected)
            await asyncio.to_thread(self._spool.keep_rejected, rejected)
        return len(records) - len(rejected)

    async def _replay_some(self) -> bool:
        """Replay one batch from the spool, if any; False when the database failed."""
        assert self._wake is not None
        current = await asyncio.to_thread(self._spool.next_replay)
        if current is None:
            return True
        try:
            # parsing a batch of JSON lines takes milliseconds: off the event loop
            batch = await asyncio.to_thread(self._spool.read, current, self._batch_size)
        except OSError as err:
            log.warning("cannot read spool file %s: %s", current.path.name, err)
            await asyncio.to_thread(self._spool.file_failed, current, err)
            self._wake.set()
            return True
        accepted = 0
        if batch.records:
            try:
                accepted = await self._write(None, batch.records, fresh=False)
            except TransientDbError:
                return False  # read again from the same offset next time
        if batch.bad:
            log.error("%d bad lines in %s: quarantined", len(batch.bad), current.path.name)
            await asyncio.to_thread(self._spool.quarantine, current, batch.bad)
        await asyncio.to_thread(self._spool.advance, current, batch)
        # counted once the spool no longer holds them, so the counters always add up
        self._counts["written"] += accepted
        self._counts["replayed"] += accepted
        self._wake.set()  # keep going without waiting a whole interval
        return True

    # -- the spool loop -----------------------------------------------------------------

    async def _spool_loop(self) -> None:
        assert self._spool_wake is not None
        while not self._stopping:
            self._loops.beat("spool")
            # twice per flush interval while the database fails: on a loaded machine the
            # loop wakes late and a spill takes an fsync, and a SIGKILL may cost only what
            # came in since the last spill (one interval at most, seen at 0.59 s otherwise)
            await wait_event(self._spool_wake, self._interval / (1 if self._database_ok else 2))
            self._spool_wake.clear()
            if self._buffer and self._should_spool():
                await self._spiller.spill(self._buffer)
                if self._closing and not self._buffer:
                    # all of it on disk: the database loop may be waiting for nothing now
                    # (not after a failed spill: the two loops would wake each other in
                    # a busy loop until the close deadline)
                    self._wake_db()
            elif not self._spool.writable:
                await asyncio.to_thread(self._spool.probe)  # ready again once it works
            if not self._closing:
                await asyncio.to_thread(self._spool.adopt_orphans_when_due)
                await self._journal.tend(self._held_rows)
            self._loops.completed("spool")

    def _should_spool(self) -> bool:
        """The database is failing, or hangs, or memory fills up: rows go to disk."""
        now = time.monotonic()
        slow = any(
            now - started >= max(self._spool_after, 4 * self._s_per_row * rows)
            for started, rows in self._writes.values()
        )
        return slow or not self._database_ok or self._held() >= self._spill_mark

    def _wake_db(self) -> None:
        if self._wake is not None:
            self._wake.set()
