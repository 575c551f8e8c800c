"""Moving rows from the record writer's memory to the spool, off the event loop.

A spool append ends in an fsync, which can take milliseconds on a healthy disk and far
longer on a sick one: it runs in a worker thread, never on the loop that serves
requests. That thread runs on when the task awaiting it is cancelled (at shutdown), so
each append is a job that settles exactly once, from the thread's own outcome: its rows
are counted as spooled, or put back in memory for the next try. Never both, never lost.
At close, rows that neither the spool nor the database takes are `rescue`d: tried on both
until a deadline, then dropped, counted.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from gateway.domain.usage_record import UsageRecord
from gateway.ledger.database import TransientDbError
from gateway.ledger.spool import Spool

log = logging.getLogger(__name__)


@dataclasses.dataclass(eq=False)
class _Job:
    records: list[UsageRecord]
    future: asyncio.Future[list[UsageRecord]]
    buffer: collections.deque[UsageRecord]  # where the rows go back if the append fails
    settled: bool = False


class Spiller:
    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self.spooled = 0  # rows durably appended
        self.write_errors = 0  # appends that failed (their rows went back to memory)
        self.dropped = 0  # rows that could not be encoded, or spooled after close
        self._job: _Job | None = None
        self._warned_at = float("-inf")

    @property
    def held(self) -> int:
        """Rows in an append that has not returned yet."""
        return len(self._job.records) if self._job is not None else 0

    @property
    def held_records(self) -> list[UsageRecord]:
        return self._job.records if self._job is not None else []

    async def spill(self, buffer: collections.deque[UsageRecord]) -> None:
        """Append everything in `buffer` to the spool; on failure, back to its front."""
        records = list(buffer)
        buffer.clear()
        future = asyncio.get_running_loop().run_in_executor(None, self.spool.append, records)
        job = _Job(records, future, buffer)
        self._job = job
        # settles the job even when the awaiting task is cancelled while the thread runs on
        future.add_done_callback(lambda _: self._settle(job))
        with contextlib.suppress(OSError):
            await asyncio.shield(future)
        self._settle(job)

    async def finish(self, timeout_s: float) -> None:
        """At close: wait for an append still running, so that its rows are accounted for."""
        job = self._job
        if job is None:
            return
        await asyncio.wait({job.future}, timeout=timeout_s)
        self._settle(job)
        if not job.settled:
            log.error("%d usage rows in a spool write that did not return", len(job.records))

    def spill_now(self, records: list[UsageRecord]) -> None:
        """After close, with no loop left: spool on the spot, or count the rows as lost."""
        try:
            # a bounded wait: an append hung on the disk must not hang the event loop too
            unencodable = self.spool.append(records, lock_timeout_s=2.0)
        except OSError as err:
            log.error("cannot spool %d usage records, they are lost: %s", len(records), err)
            self.write_errors += 1
            self.dropped += len(records)
            return
        self.count(records, unencodable)

    async def rescue(
        self,
        records: list[UsageRecord],
        write: Callable[[list[UsageRecord]], Awaitable[int]],
        until: float,
    ) -> int:
        """After close: the spool, else the database (`write`), every second until one
        takes the rows or `until` passed (then they are dropped, counted). Returns how
        many rows `write` committed."""
        while True:
            try:
                # a bounded wait: an append hung on the disk must not hang shutdown too
                unencodable = await asyncio.to_thread(
                    self.spool.append, records, lock_timeout_s=2.0
                )
            except OSError as err:
                self.write_errors += 1
                failure = f"spool: {type(err).__name__}: {err}"
            else:
                self.count(records, unencodable)
                return 0
            try:
                return await write(records)
            except TransientDbError as err:
                failure += f"; database: {type(err).__name__}"
            if time.monotonic() >= until:
                break
            log.warning("%d usage rows have nowhere to go yet (%s); trying again",
                        len(records), failure)  # fmt: skip
            await asyncio.sleep(1.0)
        log.error("%d usage records are lost: %s", len(records), failure)
        self.dropped += len(records)
        return 0

    def count(self, records: list[UsageRecord], unencodable: list[UsageRecord]) -> None:
        self.spooled += len(records) - len(unencodable)
        if unencodable:
            log.error("%d usage records cannot be encoded for the spool", len(unencodable))
            self.dropped += len(unencodable)

    def _settle(self, job: _Job) -> None:
        if job.settled or not job.future.done():
            return
        job.settled = True
        if self._job is job:
            self._job = None
        err = asyncio.CancelledError() if job.future.cancelled() else job.future.exception()
        if err is None:
            self.count(job.records, job.future.result())
            return
        self.write_errors += 1
        # kept in memory, ahead of newer rows; the spool loop tries again next interval
        job.buffer.extendleft(reversed(job.records))
        if not isinstance(err, OSError):
            log.error("spooling failed unexpectedly", exc_info=err)
        elif time.monotonic() - self._warned_at >= 60:  # an outage must not flood the log
            self._warned_at = time.monotonic()
            log.warning("cannot spool %d usage rows, kept in memory: %s", len(job.records), err)
