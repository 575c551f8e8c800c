"""The ledger's journal: every row on disk before its answer completes.

The writer's buffer lives in the replica's memory: a process killed by SIGKILL, an OOM
or a lost node takes up to a flush interval of rows of requests that were answered.
So `append` writes each row to a journal file as it is submitted (the request path
hands its record over before the response's last byte leaves, for streams in the
relay's `finally`, before the body ends). It is a plain `write(2)` into the page cache,
no fsync: the kernel keeps it when the process dies, which is the failure this guards
against (a power cut of the whole machine still needs the fsynced spool).

Journal files are spool files (same names, same JSON lines, same `flock`), in the spool
directory's `journal/` folder (apart from the spool's own files): while their
writer lives they are locked; when it dies, any writer on the same spool directory
adopts and replays them like any orphan, and the ledger's insert is idempotent by
request id, so rows that had reached PostgreSQL already are not counted twice. A node
on another machine replays them if the spool directory is shared storage, or when a
replica starts again on that machine (docs/deploy.md).

A file (a segment) is sealed every ROTATE_S, remembering which rows the writer held in
memory at that moment; it is deleted once none of them is held any more (each then
committed, spooled with fsync, or dropped and counted). Rows leave memory out of order
(a batch in flight, another spilled), hence the set rather than a count.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from gateway.domain.usage_record import UsageRecord
from gateway.ledger.spool import JOURNAL_DIR, SPOOL_PREFIX
from gateway.ledger.spool_files import create_locked

log = logging.getLogger(__name__)

ROTATE_S = 1.0


@dataclasses.dataclass
class Segment:
    path: Path
    fd: int
    lines: int = 0
    opened: float = dataclasses.field(default_factory=time.monotonic)
    pending: set[int] = dataclasses.field(default_factory=set)  # id()s of rows held


class Journal:
    """One writer's journal segments. `append` runs on the event loop; `new_segment` and
    `delete` do file system work and belong in a worker thread."""

    def __init__(self, spool_dir: Path) -> None:
        self.directory = Path(spool_dir) / JOURNAL_DIR
        self.appended = 0
        self.errors = 0  # failed appends: the journal then stops, the rows go on as before
        self._token = uuid.uuid4().hex[:12]
        self._current: Segment | None = None
        self._sealed: list[Segment] = []

    @property
    def working(self) -> bool:
        return self._current is not None

    def new_segment(self) -> Segment | None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            name = f"{SPOOL_PREFIX}{os.getpid()}-{self._token}-j{uuid.uuid4().hex[:8]}.jsonl"
            path = self.directory / name
            return Segment(path, create_locked(path))
        except OSError as err:
            self.errors += 1
            log.error("usage journal unavailable (rows stay in memory only): %s", err)
            return None

    def open(self) -> None:
        self._current = self.new_segment()

    def append(self, record: UsageRecord) -> None:
        """Never raises: a journal that cannot write stops, and says so once."""
        seg = self._current
        if seg is None:
            return
        try:
            data = record.to_json_bytes() + b"\n"
            view = memoryview(data)
            while view:
                view = view[os.write(seg.fd, view) :]
        except (OSError, TypeError, ValueError) as err:
            self.errors += 1
            log.error("usage journal stopped (rows stay in memory only): %s", err)
            self._seal(set())
            self._current = None
            return
        seg.lines += 1
        self.appended += 1

    def due(self) -> bool:
        seg = self._current
        return seg is not None and seg.lines > 0 and time.monotonic() - seg.opened >= ROTATE_S

    def rotate(self, new: Segment | None, held: Iterable[UsageRecord]) -> None:
        """Seal the current segment with the rows held now; `new` takes the next rows."""
        if self._current is None:
            if new is not None:
                self._delete_now(new)
            return
        self._seal({id(r) for r in held})
        self._current = new

    def _seal(self, pending: set[int]) -> None:
        if self._current is not None:
            self._current.pending = pending
            self._sealed.append(self._current)

    def settled(self, held: Iterable[UsageRecord]) -> list[Segment]:
        """Sealed segments none of whose rows is held any more: to `delete`."""
        if not self._sealed:
            return []
        now = {id(r) for r in held}
        done: list[Segment] = []
        kept: list[Segment] = []
        for seg in self._sealed:
            seg.pending &= now
            (kept if seg.pending else done).append(seg)
        self._sealed = kept
        return done

    async def tend(self, held: Callable[[], list[UsageRecord]]) -> None:
        """Seal the segment when due; delete those whose rows all left memory. On the
        writer's loop, the file system calls in a worker thread."""
        due = self.due()
        new = await asyncio.to_thread(self.new_segment) if due else None
        if not due and not self._sealed:
            return
        # the held rows once: at 20,000 rows a second they are tens of thousands, and each
        # pass over them is milliseconds of the event loop (issue 29)
        rows = held()
        if due:
            self.rotate(new, rows)
        done = self.settled(rows)
        if done:
            await asyncio.to_thread(Journal.delete, done)

    def close_all(self) -> list[Segment]:
        """At the writer's close, every row accounted for: all segments, to `delete`."""
        out = self._sealed + ([self._current] if self._current is not None else [])
        self._sealed, self._current = [], None
        return out

    @staticmethod
    def delete(segments: list[Segment]) -> None:
        for seg in segments:
            Journal._delete_now(seg)

    @staticmethod
    def _delete_now(seg: Segment) -> None:
        # unlinked while still locked: no other writer can claim it in between
        with contextlib.suppress(OSError):
            seg.path.unlink()
        with contextlib.suppress(OSError):
            os.close(seg.fd)
