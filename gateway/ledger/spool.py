"""The ledger's local-disk spool: where usage records wait while PostgreSQL cannot take them.

It is a file protocol shared by every writer on one directory (replicas of one deployment,
and their replacements after a crash), so its rules live here, apart from the writer's
database logic: a file must mean the same thing to whichever process finds it.

File format: append-only JSON lines, one `UsageRecord.to_json()` per line, UTF-8. Names:

- `usage-spool-<pid>-<token>.jsonl`: the file a live writer appends to.
- `usage-replay-<pid>-<token>-<nonce>.jsonl`: a file claimed for replay by writer `<token>`.
- `usage-rejected-<pid>-<token>.jsonl`: rows the database refused for their content; kept
  for a person to look at, never replayed.

A file is claimed by an atomic rename to a replay name of the claimer's, so when several
writers see the same file exactly one wins. Spool and replay files whose owner is gone (its
process died, or it is a writer of this process that was closed) are orphans: adopted by
the next writer started on the directory, or by a running one on its periodic scan.

Replay reads a file in batches by byte offset, so a batch whose write failed is read again
from the same place. A last line without its newline (a crash mid-append) and lines that do
not parse are counted as corrupt and skipped; a file is deleted once read to its end.

Call everything from the writer's event loop thread, except `read_batch`, which only reads
and may run in a worker thread.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from pathlib import Path
from typing import IO

from gateway.domain.usage_record import UsageRecord

log = logging.getLogger(__name__)

SPOOL_PREFIX = "usage-spool-"
REPLAY_PREFIX = "usage-replay-"
REJECTED_PREFIX = "usage-rejected-"

ORPHAN_SCAN_INTERVAL_S = 30.0

# writers alive in this process, by token: their spool files are not orphans
_LIVE_TOKENS: set[str] = set()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
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
class ReplayFile:
    path: Path
    lines: int  # not yet replayed
    offset: int = 0  # bytes already replayed


class Spool:
    """One writer's share of a spool directory: its own file, and the files it has claimed.

    `append`, and the rotation of our file in `next_replay`, raise what the file system
    raises; the rest log or swallow it, since a spool directory that cannot be used must
    not stop records from reaching PostgreSQL.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.token = uuid.uuid4().hex[:12]
        self.adopted = 0  # lines taken over from other writers' files
        self._file: IO[str] | None = None
        self._path = self.directory / f"{SPOOL_PREFIX}{os.getpid()}-{self.token}.jsonl"
        self._lines = 0  # lines in our own file, not yet claimed for replay
        self._replays: collections.deque[ReplayFile] = collections.deque()
        self._next_orphan_scan = time.monotonic() + ORPHAN_SCAN_INTERVAL_S

    @property
    def depth(self) -> int:
        """Lines in spool files not yet replayed."""
        return self._lines + sum(r.lines for r in self._replays)

    # -- lifecycle ----------------------------------------------------------------------

    def open(self) -> None:
        """Mark this writer live, so no one adopts its files, and adopt the orphans."""
        _LIVE_TOKENS.add(self.token)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._adopt_orphans()
        except OSError:
            log.exception("cannot use the spool directory %s", self.directory)

    def release(self) -> None:
        """Give up this writer's files: from now on they are orphans for others to adopt."""
        _LIVE_TOKENS.discard(self.token)

    # -- appending ----------------------------------------------------------------------

    def append(self, records: list[UsageRecord], *, flush: bool) -> None:
        """Append to our file; raises OSError, TypeError or ValueError, counting nothing."""
        if self._file is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._file = open(self._path, "a", encoding="utf-8")  # noqa: SIM115
        self._file.writelines(r.to_json() + "\n" for r in records)
        if flush:
            self._file.flush()
        self._lines += len(records)

    def keep_rejected(self, records: list[UsageRecord]) -> None:
        path = self.directory / f"{REJECTED_PREFIX}{os.getpid()}-{self.token}.jsonl"
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.writelines(r.to_json() + "\n" for r in records)
        except OSError:
            log.exception("cannot keep rejected records in %s", path)

    def flush(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            except OSError:
                log.exception("cannot flush the spool file")

    def close_file(self) -> None:
        """Close our file; a later `append` opens it again."""
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    # -- replaying ----------------------------------------------------------------------

    def next_replay(self) -> ReplayFile | None:
        """The file to replay a batch from, or None when nothing is spooled.

        With no claimed file left, our own file is rotated (claimed, so appends start a
        fresh one) and, at most every ORPHAN_SCAN_INTERVAL_S, the directory is scanned
        for files a sibling that died after we started left behind.
        """
        if not self._replays and self._lines:
            self.close_file()
            lines, self._lines = self._lines, 0
            self._claim(self._path, lines)
        if not self._replays and time.monotonic() >= self._next_orphan_scan:
            self._next_orphan_scan = time.monotonic() + ORPHAN_SCAN_INTERVAL_S
            with contextlib.suppress(OSError):
                self._adopt_orphans()
        return self._replays[0] if self._replays else None

    def advance(self, replay: ReplayFile, end: int, consumed: int) -> None:
        """Move past a batch of `consumed` lines ending at byte `end` of `replay`.

        A batch that consumed nothing is the end of the file: the file is deleted.
        """
        replay.offset = end
        replay.lines = max(0, replay.lines - consumed)
        if not consumed:
            with contextlib.suppress(OSError):
                replay.path.unlink()
            self._replays.popleft()

    def _claim(self, path: Path, lines: int | None = None) -> None:
        """Rename a spool file to a replay file of ours (atomic: one claimer wins).

        `lines` is None for another writer's file: it is counted, and counted as adopted.
        """
        name = f"{REPLAY_PREFIX}{os.getpid()}-{self.token}-{uuid.uuid4().hex[:8]}.jsonl"
        target = self.directory / name
        try:
            path.rename(target)
        except FileNotFoundError:
            return  # another writer claimed it first
        if lines is None:
            with open(target, "rb") as f:
                lines = sum(1 for _ in f)
            self.adopted += lines
        self._replays.append(ReplayFile(target, lines))

    def _adopt_orphans(self) -> None:
        for path in sorted(self.directory.glob("usage-*.jsonl")):
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


def read_batch(path: Path, offset: int, limit: int) -> tuple[list[UsageRecord], int, int]:
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
