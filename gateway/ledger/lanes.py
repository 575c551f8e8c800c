"""The record writer's connections: batches written side by side, one transaction each.

One connection alternates between the writer's process (building and encoding a batch)
and PostgreSQL (the COPY, then the rollup folds of its statement trigger): each waits
while the other works, so one core idles. With two, the next batch is encoded and
COPYed while the server folds the previous one. `costgate ledger-bench --rows 200000
--connections 1|2` here (issue 29): rows that are each their own group in every rollup
11,136 rows/s on one connection, 17,988 on two; realistic ones 24,393 and 31,809. A
third did not add more: the two cores are full (docs/ROLLUPS.md).

Exactness does not depend on the order batches commit in: each batch and its share of
the rollups commit together, and every fold takes its groups' locks in key order, so two
batches sharing groups wait for each other, never deadlock (docs/ROLLUPS.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.domain.usage_record import UsageRecord
from gateway.ledger.database import LedgerDatabase, TransientDbError

Write = Callable[[LedgerDatabase, list[UsageRecord]], Coroutine[Any, Any, int]]


class Lanes:
    def __init__(self, make: Callable[[], LedgerDatabase], count: int) -> None:
        if count < 1:
            raise ValueError("need at least one connection")
        self._dbs = [make() for _ in range(count)]
        # the rows each lane is writing: not in the buffer, not yet committed
        self._batches: list[list[UsageRecord]] = [[] for _ in range(count)]

    @property
    def databases(self) -> tuple[LedgerDatabase, ...]:
        return tuple(self._dbs)

    @property
    def first(self) -> LedgerDatabase:
        """The connection for work that goes one batch at a time (spool replays, close)."""
        return self._dbs[0]

    def held(self) -> int:
        return sum(len(b) for b in self._batches)

    def held_rows(self) -> list[UsageRecord]:
        return [r for b in self._batches for r in b]

    def take_all(self) -> list[UsageRecord]:
        """The rows of every batch in flight (a write that was cancelled or crashed), which
        the caller puts back: idempotent, a batch may have committed."""
        rows = self.held_rows()
        self._batches = [[] for _ in self._dbs]
        return rows

    async def close(self) -> None:
        for db in self._dbs:
            await db.close()

    async def drain(
        self,
        buffer: collections.deque[UsageRecord],
        write: Write,
        accepted: Callable[[int], None],
        *,
        max_batch: int,
        min_batch: int,
        wake: asyncio.Event,
    ) -> bool:
        """Write `buffer` out, up to one batch per lane in flight, until it is empty and
        every write has ended; `accepted` is told each batch's committed rows as it ends.
        False when the database failed: the failed batches' rows are back at the buffer's
        front and no new batch was started after the failure.

        A lane idle beside a busy one starts only with `min_batch` rows or more (`wake`
        is set when the buffer reaches them): a few rows are cheaper in the next batch
        than in a transaction of their own.
        """
        pending: dict[asyncio.Future[Any], int] = {}  # write -> its lane
        woken: asyncio.Future[Any] | None = None
        ok = True
        try:
            while pending or (ok and buffer):
                for lane in range(len(self._dbs)):
                    if not ok or not buffer or (pending and len(buffer) < min_batch):
                        break
                    if lane in pending.values():
                        continue
                    n = min(max_batch, len(buffer))
                    batch = self._batches[lane] = [buffer.popleft() for _ in range(n)]
                    pending[asyncio.create_task(write(self._dbs[lane], batch))] = lane
                waiting: set[asyncio.Future[Any]] = {*pending}
                if ok and len(pending) < len(self._dbs):
                    wake.clear()  # the buffer holds fewer than min_batch rows now
                    woken = asyncio.ensure_future(wake.wait())
                    waiting.add(woken)
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if woken is not None:
                    woken.cancel()  # if it did not fire
                    woken = None
                bug: BaseException | None = None
                for task in done & pending.keys():
                    err = task.exception()
                    if err is not None and not isinstance(err, TransientDbError):
                        bug = err  # its rows stay in flight: the supervisor's recovery
                        continue  # takes them back
                    lane = pending.pop(task)
                    if err is None:
                        accepted(task.result())
                    else:
                        ok = False
                        buffer.extendleft(reversed(self._batches[lane]))
                    self._batches[lane] = []
                if bug is not None:
                    raise bug
        finally:
            # cancelled (the close's deadline) or a bug: no write outlives the drain, and
            # its rows stay in `_batches` for `take_all`
            if woken is not None:
                woken.cancel()
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(BaseException):
                    await task
        return ok
