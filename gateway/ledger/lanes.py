"""The record writer's connections: batches written side by side, one transaction each.

One connection alternates between the writer's process (building and encoding a batch)
and PostgreSQL (the COPY, then the rollup folds of its statement trigger): each waits
while the other works, so one core idles. With two, the next batch is encoded and
COPYed while the server folds the previous one. `costgate ledger-bench --rows 200000
--connections 1|2` here (issue 29): rows that are each their own group in every rollup
11,136 rows/s on one connection, 17,988 on two; realistic ones 24,393 and 31,809. A
third did not add more: the two cores are full (docs/ROLLUPS.md).

While a lane's batch is on the server, the rows that come in meanwhile become its next
batch, and their COPY data is made then (`LedgerDatabase.encode`), a few hundred rows at a
time: the lane's next COPY is only bytes to send. Made at the COPY instead, by the one
thread that also serves the other lane and the requests, they kept the lane's backend
waiting for data a quarter of its time (issue 29: 18,100-18,500 rows/s where COPY data
made beforehand reached 22,400-22,500).

Exactness does not depend on the order batches commit in: each batch and its share of
the rollups commit together, and every fold takes its groups' locks in key order, so two
batches sharing groups wait for each other, never deadlock (docs/ROLLUPS.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.domain.usage_record import UsageRecord
from gateway.ledger.database import LedgerDatabase, TransientDbError

# a batch's rows and, when they were made ahead, its COPY data (None: made as it goes)
Write = Callable[[LedgerDatabase, list[UsageRecord], list[bytes] | None], Coroutine[Any, Any, int]]


@dataclasses.dataclass
class _Ahead:
    """A busy lane's next batch: its rows, and their COPY data being made in parts."""

    rows: list[UsageRecord] = dataclasses.field(default_factory=list)
    parts: list[asyncio.Task[list[bytes] | None]] = dataclasses.field(default_factory=list)

    async def encoded(self) -> list[bytes] | None:
        done = await asyncio.gather(*self.parts)
        if any(p is None for p in done):
            return None
        return [chunk for p in done if p is not None for chunk in p]

    def cancel(self) -> None:
        for task in self.parts:
            task.cancel()


class Lanes:
    def __init__(self, make: Callable[[], LedgerDatabase], count: int) -> None:
        if count < 1:
            raise ValueError("need at least one connection")
        self._dbs = [make() for _ in range(count)]
        # the rows each lane is writing: not in the buffer, not yet committed
        self._batches: list[list[UsageRecord]] = [[] for _ in range(count)]
        # each lane's next batch, taken from the buffer while it writes the current one
        self._ahead = [_Ahead() for _ in range(count)]

    @property
    def databases(self) -> tuple[LedgerDatabase, ...]:
        return tuple(self._dbs)

    @property
    def first(self) -> LedgerDatabase:
        """The connection for work that goes one batch at a time (spool replays, close)."""
        return self._dbs[0]

    def held(self) -> int:
        return sum(len(b) for b in self._batches) + sum(len(a.rows) for a in self._ahead)

    def held_rows(self) -> list[UsageRecord]:
        return [r for b in self._batches for r in b] + [r for a in self._ahead for r in a.rows]

    def take_all(self) -> list[UsageRecord]:
        """The rows of every batch in flight (a write that was cancelled or crashed) and of
        every next batch, which the caller puts back: idempotent, a batch may have
        committed."""
        rows = self.held_rows()
        self._batches = [[] for _ in self._dbs]
        self._drop_ahead()
        return rows

    def _drop_ahead(self) -> list[UsageRecord]:
        rows = [r for a in self._ahead for r in a.rows]
        for a in self._ahead:
            a.cancel()
        self._ahead = [_Ahead() for _ in self._dbs]
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
        than in a transaction of their own. So does a busy lane's next batch, which grows
        by `min_batch` rows or more at a time, up to `max_batch`.
        """
        pending: dict[asyncio.Future[Any], int] = {}  # write -> its lane, in start order
        woken: asyncio.Future[Any] | None = None
        ok, front = True, 0  # front: the failed batches' rows put back first in the buffer
        try:
            while pending or (ok and (buffer or any(a.rows for a in self._ahead))):
                if ok:
                    self._start(pending, buffer, write, max_batch=max_batch, min_batch=min_batch)
                    self._take_ahead(pending, buffer, max_batch=max_batch, min_batch=min_batch)
                waiting: set[asyncio.Future[Any]] = {*pending}
                if ok and (len(pending) < len(self._dbs) or self._room_ahead(max_batch)):
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
                        front += len(self._batches[lane])
                    self._batches[lane] = []
                if bug is not None:
                    raise bug
            # after a failure the next batches were not started: back to the buffer, behind
            # the failed batches' rows and before the rows that came after them
            failed = [buffer.popleft() for _ in range(front)]
            buffer.extendleft(reversed(self._drop_ahead()))
            buffer.extendleft(reversed(failed))
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

    def _start(
        self,
        pending: dict[asyncio.Future[Any], int],
        buffer: collections.deque[UsageRecord],
        write: Write,
        *,
        max_batch: int,
        min_batch: int,
    ) -> None:
        """A batch on every idle lane: its next batch if it has one, else from the buffer."""
        for lane, db in enumerate(self._dbs):
            if lane in pending.values():
                continue
            ahead = self._ahead[lane]
            if ahead.rows:
                self._ahead[lane] = _Ahead()
                self._batches[lane] = ahead.rows
                pending[asyncio.create_task(_write_ahead(write, db, ahead))] = lane
            elif buffer and (not pending or len(buffer) >= min_batch):
                n = min(max_batch, len(buffer))
                batch = self._batches[lane] = [buffer.popleft() for _ in range(n)]
                pending[asyncio.create_task(write(db, batch, None))] = lane

    def _take_ahead(
        self,
        pending: dict[asyncio.Future[Any], int],
        buffer: collections.deque[UsageRecord],
        *,
        max_batch: int,
        min_batch: int,
    ) -> None:
        """The waiting rows to the next batch of the busy lane that started first (the one
        likely to end first), their COPY data made from now on."""
        for lane in pending.values():
            ahead = self._ahead[lane]
            room = max_batch - len(ahead.rows)
            if len(buffer) < min_batch:
                return
            if room <= 0:
                continue
            rows = [buffer.popleft() for _ in range(min(room, len(buffer)))]
            ahead.rows += rows
            ahead.parts.append(asyncio.create_task(self._dbs[lane].encode(rows)))

    def _room_ahead(self, max_batch: int) -> bool:
        return any(len(a.rows) < max_batch for a in self._ahead)


async def _write_ahead(write: Write, db: LedgerDatabase, ahead: _Ahead) -> int:
    return await write(db, ahead.rows, await ahead.encoded())
