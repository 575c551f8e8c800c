"""The ledger's local-disk spool: where usage records wait while PostgreSQL cannot take them.

It is a file protocol shared by every writer on one directory (replicas of one deployment,
and their replacements after a crash), so its rules live here, apart from the writer's
database logic: a file must mean the same thing to whichever process finds it. The system
calls it rests on are in `gateway.ledger.spool_files`.

File format: append-only JSON lines, one `UsageRecord.to_json()` per line, UTF-8. Names
(`<pid>` is for people reading the directory; ownership is the lock, never the PID):

- `usage-spool-<pid>-<token>-<nonce>.jsonl`: a file a live writer appends to.
- `usage-replay-<pid>-<token>-<nonce>.jsonl`: a file claimed for replay by writer `<token>`.
- `usage-rejected-<pid>-<token>.jsonl`: rows the database refused for their content; kept
  for a person to look at, never replayed.
- `usage-quarantine-<pid>-<token>.jsonl`: lines that replay could not turn into records,
  one JSON object each (source file, byte offset, reason, the line itself); and
  `usage-quarantine-file-<name>`: a whole file that could not be read. Never replayed.

Every spool and replay file is held, while its writer has a use for it, by an exclusive
`flock` on a descriptor the writer keeps open. A file nobody holds is an orphan (its
writer died, or was closed): the next writer to look (at start, every
ORPHAN_SCAN_INTERVAL_S, here and in `journal/`) claims it by an atomic rename to a replay
name of its own, and replays it.

A row counts as spooled once `append` returned: written, fsynced, and its file's name
fsynced into the directory. After a failed append the file's tail is unknown, so the file
takes no more appends, is cut back to its size before the failure (a full disk gets the
space back) and is replayed only up to there.

Replay reads a file in batches by byte offset (a failed batch is read again from there);
lines that are not records are quarantined, counted; a file read to its end is deleted.

Thread-safe: the writer runs the blocking calls in worker threads. Counters (`depth`,
`adopted`, `quarantined`, `lost`, `writable`, `last_error`) may be read from any thread.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import threading
import time
import uuid
from pathlib import Path

from gateway.domain.usage_record import UsageRecord
from gateway.ledger.spool_files import (
    BadLine,
    Batch,
    append_durably,
    claim,
    create_locked,
    fsync_dir,
    open_private,
    read_batch,
)

log = logging.getLogger(__name__)

SPOOL_PREFIX = "usage-spool-"
REPLAY_PREFIX = "usage-replay-"
REJECTED_PREFIX = "usage-rejected-"
QUARANTINE_PREFIX = "usage-quarantine-"
JOURNAL_DIR = "journal"  # the writers' journals (gateway.ledger.journal): spool files

ORPHAN_SCAN_INTERVAL_S = 30.0
# files held for replay at once: each holds a descriptor (its lock)
MAX_CLAIMED_FILES = 64
# a file that cannot be read this many times in a row is set aside whole
FILE_FAILURES_BEFORE_QUARANTINE = 3


@dataclasses.dataclass
class ReplayFile:
    path: Path
    fd: int  # holds the file's lock until it is replayed
    lines: int  # not yet replayed
    offset: int = 0  # bytes already replayed
    end: int | None = None  # replay no further: what lies past it was never spooled
    failures: int = 0  # reads that failed in a row
    keep: bool = False  # a bad line could not be quarantined: keep the file at its end


@dataclasses.dataclass
class _OwnFile:
    path: Path
    fd: int
    size: int = 0
    lines: int = 0


class Spool:
    """One writer's share of a spool directory: its own file, and the files it has claimed.

    `append` raises what the file system raises (the rows are then not spooled); the rest
    logs or counts it, since a spool directory that cannot be used must not stop records
    from reaching PostgreSQL.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.token = uuid.uuid4().hex[:12]
        self.depth = 0  # lines in files we hold, not yet replayed
        self.adopted = 0  # lines taken over from other writers' files
        self.quarantined = 0  # lines set aside by replay
        self.lost = 0  # lines of held files that vanished before replay
        self.writable = False  # the last attempt to write (or open) our file worked
        self.last_error: str | None = "not opened yet"
        self._lock = threading.Lock()
        self._own: _OwnFile | None = None
        self._replays: collections.deque[ReplayFile] = collections.deque()
        self._broken: list[ReplayFile] = []  # unreadable and not renameable: held, not read
        self._quarantine_fd: int | None = None
        self._closed = False
        self._next_orphan_scan = time.monotonic() + ORPHAN_SCAN_INTERVAL_S

    def _name(self, prefix: str) -> Path:
        return self.directory / f"{prefix}{os.getpid()}-{self.token}-{uuid.uuid4().hex[:8]}.jsonl"

    # -- lifecycle ----------------------------------------------------------------------

    def open(self) -> None:
        """Create and lock our file (which proves the directory writable), adopt orphans."""
        with self._lock:
            try:
                self._open_own()
                self.writable, self.last_error = True, None
            except OSError as err:
                self._failed(err)
                log.error("cannot write the spool directory %s: %s", self.directory, err)
            try:
                self._adopt_orphans()
            except OSError as err:
                log.error("cannot look for orphan spool files in %s: %s", self.directory, err)

    def probe(self) -> bool:
        """After a failure: can our file be opened again? Sets `writable`."""
        with self._lock:
            try:
                self._open_own()
            except OSError as err:
                self._failed(err)
                return False
            self.writable, self.last_error = True, None
            return True

    def close(self) -> None:
        """Release every file: what is left in them is for the next writer to adopt.

        A later `append` still works: it spools to a new file and releases it at once.
        """
        with self._lock:
            self._closed = True
            self._release_own()
            for replay in [*self._replays, *self._broken]:
                with contextlib.suppress(OSError):
                    os.close(replay.fd)
            self._replays.clear()
            self._broken.clear()
            fd, self._quarantine_fd = self._quarantine_fd, None
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    # -- appending ----------------------------------------------------------------------

    def append(
        self, records: list[UsageRecord], *, lock_timeout_s: float | None = None
    ) -> list[UsageRecord]:
        """Spool `records` durably; return those that cannot be encoded (not spooled).
        Raises OSError when the file system fails (none of them spooled), TimeoutError
        when another append holds the spool longer than `lock_timeout_s` (a hung disk)."""
        lines: list[bytes] = []
        unencodable: list[UsageRecord] = []
        for r in records:
            try:
                lines.append(r.to_json_bytes() + b"\n")
            except (TypeError, ValueError, AttributeError):
                unencodable.append(r)
        if not lines:
            return unencodable
        data = b"".join(lines)
        if not self._lock.acquire(timeout=-1 if lock_timeout_s is None else lock_timeout_s):
            raise TimeoutError("another spool write has not returned")
        try:
            try:
                own = self._open_own()
                append_durably(own.fd, data)
            except OSError as err:
                self._failed(err)
                self._retire_own()
                raise
            own.size += len(data)
            own.lines += len(lines)
            self.depth += len(lines)
            self.writable, self.last_error = True, None
            if self._closed:
                self._release_own()  # no writer is left to hold it: an orphan to adopt
        finally:
            self._lock.release()
        return unencodable

    def keep_rejected(self, records: list[UsageRecord]) -> None:
        path = self.directory / f"{REJECTED_PREFIX}{os.getpid()}-{self.token}.jsonl"
        lines = []
        for r in records:
            try:
                lines.append(r.to_json())
            except (TypeError, ValueError, AttributeError):
                lines.append(repr(r))  # evidence for a person, not a row to replay
        try:
            with self._lock, open(path, "a", encoding="utf-8", opener=open_private) as f:
                f.writelines(line + "\n" for line in lines)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            log.exception("cannot keep rejected records in %s", path)

    def _open_own(self) -> _OwnFile:
        if self._own is not None:
            return self._own
        self.directory.mkdir(parents=True, exist_ok=True)
        for attempt in range(5):
            path = self._name(SPOOL_PREFIX)
            try:
                self._own = _OwnFile(path, create_locked(path))
                return self._own
            except (FileExistsError, BlockingIOError):
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def _failed(self, err: OSError) -> None:
        self.writable, self.last_error = False, f"{type(err).__name__}: {err}"

    def _retire_own(self) -> None:
        """Our file after a failed write: no more appends; replay what was there before."""
        own, self._own = self._own, None
        if own is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(own.fd, own.size)
        if own.lines:
            self._claim_own(own)
            return
        with contextlib.suppress(OSError):
            own.path.unlink()  # before the lock goes, so no one adopts the torn tail
        with contextlib.suppress(OSError):
            os.close(own.fd)

    def _release_own(self) -> None:
        own, self._own = self._own, None
        if own is None:
            return
        if not own.lines:
            with contextlib.suppress(OSError):
                own.path.unlink()
        with contextlib.suppress(OSError):
            os.close(own.fd)

    def _claim_own(self, own: _OwnFile) -> None:
        target = self._name(REPLAY_PREFIX)
        try:
            own.path.rename(target)
            fsync_dir(self.directory)
        except OSError as err:  # still ours under its old name: we hold its lock
            log.warning("cannot rename %s for replay: %s", own.path.name, err)
            target = own.path if own.path.exists() else target
        self._replays.append(ReplayFile(target, own.fd, own.lines, end=own.size))

    # -- replaying ----------------------------------------------------------------------

    def next_replay(self) -> ReplayFile | None:
        """The file to replay a batch from, or None when nothing is spooled.

        With no claimed file left, our own file is rotated: claimed for replay, so that
        appends start a fresh one.
        """
        with self._lock:
            if not self._replays and self._own is not None and self._own.lines:
                own, self._own = self._own, None
                self._claim_own(own)
            return self._replays[0] if self._replays else None

    def read(self, replay: ReplayFile, limit: int) -> Batch:
        """The next batch of `replay` (only its holder reads it: no lock). Raises OSError."""
        return read_batch(replay.path, replay.offset, limit, replay.end)

    def advance(self, replay: ReplayFile, batch: Batch) -> None:
        """Move past `batch`; a file read to its end is deleted (or kept, see `keep`)."""
        with self._lock:
            replay.offset = batch.end
            replay.failures = 0
            done = min(batch.consumed, replay.lines)
            replay.lines -= done
            self.depth -= done
            if batch.at_end:
                self._finish(replay, "file-" if replay.keep else None)

    def quarantine(self, replay: ReplayFile, bad: list[BadLine]) -> None:
        """Set lines that are not records aside, counted, in our quarantine file."""
        data = "".join(b.to_json(replay.path.name) + "\n" for b in bad).encode("utf-8")
        with self._lock:
            self.quarantined += len(bad)
            try:
                if self._quarantine_fd is None:
                    path = self.directory / f"{QUARANTINE_PREFIX}{os.getpid()}-{self.token}.jsonl"
                    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
                    self._quarantine_fd = open_private(str(path), flags)
                    fsync_dir(self.directory)
                append_durably(self._quarantine_fd, data)
            except OSError as err:
                # the lines are still in their own file: keep that file whole, not deleted
                log.error("cannot write the quarantine file (%s): keeping %s", err, replay.path)
                replay.keep = True
                fd, self._quarantine_fd = self._quarantine_fd, None
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def file_failed(self, replay: ReplayFile, err: OSError) -> None:
        """A read of `replay` failed: retry it later, or after a few failures set it aside."""
        with self._lock:
            if isinstance(err, FileNotFoundError):
                log.error("spool file %s vanished: %d rows lost", replay.path, replay.lines)
                self.lost += replay.lines
                self._finish(replay, None, unlink=False)
                return
            replay.failures += 1
            if replay.failures < FILE_FAILURES_BEFORE_QUARANTINE:
                self._replays.rotate(-1)  # other files first
                return
            log.error("cannot read spool file %s (%s): set aside whole", replay.path, err)
            self.quarantined += replay.lines
            self._finish(replay, "file-")

    def _finish(self, replay: ReplayFile, set_aside: str | None, *, unlink: bool = True) -> None:
        """Drop `replay` from the queue: delete it, or rename it with `set_aside`."""
        self.depth -= replay.lines
        replay.lines = 0
        with contextlib.suppress(ValueError):
            self._replays.remove(replay)
        try:
            if set_aside is not None:
                replay.path.rename(
                    self.directory / f"{QUARANTINE_PREFIX}{set_aside}{replay.path.name}"
                )
            elif unlink:
                replay.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as err:
            # still under a name writers adopt: hold its lock for as long as we live, or
            # the next writer replays it again (or fails on it again)
            log.error("cannot remove spool file %s: %s", replay.path, err)
            self._broken.append(replay)
            return
        with contextlib.suppress(OSError):
            os.close(replay.fd)

    # -- orphans ------------------------------------------------------------------------

    def adopt_orphans_when_due(self) -> int:
        """Every ORPHAN_SCAN_INTERVAL_S: adopt files a writer that is gone left behind."""
        with self._lock:
            if time.monotonic() < self._next_orphan_scan:
                return 0
            self._next_orphan_scan = time.monotonic() + ORPHAN_SCAN_INTERVAL_S
            try:
                return self._adopt_orphans()
            except OSError as err:
                log.error("cannot look for orphan spool files: %s", err)
                return 0

    def _adopt_orphans(self) -> int:
        found = 0
        journals = sorted((self.directory / JOURNAL_DIR).glob(f"{SPOOL_PREFIX}*.jsonl"))
        for path in sorted(self.directory.glob("usage-*.jsonl")) + journals:
            if not path.name.startswith((SPOOL_PREFIX, REPLAY_PREFIX)):
                continue
            if len(self._replays) >= MAX_CLAIMED_FILES:
                self._next_orphan_scan = time.monotonic()  # the rest at the next look
                break
            target = self._name(REPLAY_PREFIX)
            try:
                claimed = claim(path, target)
            except OSError as err:  # a directory under a spool name, a bad disk block
                log.warning("cannot claim spool file %s: %s", path.name, err)
                continue
            if claimed is None:
                continue  # its writer is alive
            fd, lines = claimed
            self.adopted += lines
            self.depth += lines
            found += lines
            self._replays.append(ReplayFile(target, fd, lines))
        return found
