"""The spool's file primitives: locked files, durable appends, and reading lines back.

Kept apart from `gateway.ledger.spool` (which decides which file holds what) so that
the few system calls whose order is the whole guarantee can be read on their own:

- A spool file belongs to whoever holds an exclusive `flock` on it. The kernel drops the
  lock when its holder's process dies, however it dies (SIGKILL, OOM), so a file nobody
  holds is an orphan. PIDs say nothing here: a container's replacement process often
  gets the very PID its predecessor had. A lock follows the inode, so it survives the
  renames that claim a file.
- A row is on disk once `write` wrote all its bytes and `fsync` returned; a file's name
  is on disk once the directory was fsynced after the create or the rename.
- Reading back never trusts a line: whatever does not decode into a record is handed
  back as a `BadLine` for the quarantine, and the rest of the file is read on.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from pathlib import Path
from typing import BinaryIO

from gateway.domain.usage_record import UsageRecord

# a record is about 1 KB of JSON: anything this long is not one, and reading it whole
# would cost memory for nothing
MAX_LINE_BYTES = 1 << 20
_CHUNK = 1 << 16


def fsync_dir(directory: Path) -> None:
    """Make a create, rename or unlink in `directory` survive a power cut."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _same_file(path: Path, fd: int) -> bool:
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)


def try_lock(path: Path) -> int | None:
    """`path` opened for appending and exclusively locked, or None if someone holds it.

    None too when the file vanished or was renamed away (claimed by another writer)
    between our open and our lock: the lock we would get is on a file no one will look
    for under this name.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _same_file(path, fd):
            return fd
    except BlockingIOError:
        pass  # a live writer's file
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


FILE_MODE = 0o600


def open_private(path: str, flags: int) -> int:
    """`open()`'s opener for a file only this user reads (a new one is made 600)."""
    return os.open(path, flags, FILE_MODE)


def create_locked(path: Path) -> int:
    """Create `path` (it must not exist), lock it, and fsync its directory.

    Raises FileExistsError when the name is taken and BlockingIOError when another
    writer adopted the new, empty file in the instant between create and lock: the
    caller tries again under another name.
    """
    # 600: rows name apps, end users and tags; this user's replicas are the only readers
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not _same_file(path, fd):
            raise BlockingIOError(f"{path.name} was claimed as it was created")
        fsync_dir(path.parent)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_durably(fd: int, data: bytes) -> None:
    """Write all of `data` at the end of the file, then fsync. Raises OSError.

    After a failure the file's tail is unknown: part of `data` may be there, and after a
    failed fsync the kernel may have dropped pages it reported written. The caller must
    not append to this file again, and must replay it only up to its size before.
    """
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.fsync(fd)


def claim(path: Path, target: Path) -> tuple[int, int] | None:
    """Lock an orphan and rename it to `target`: (its locked fd, its lines).

    None when a live writer holds it (or it is gone); OSError when it cannot be claimed,
    with the lock given up, so that a writer that can claim it does.
    """
    fd = try_lock(path)
    if fd is None:
        return None
    try:
        path.rename(target)
        fsync_dir(target.parent)
        return fd, count_lines(target)
    except BaseException:
        os.close(fd)
        raise


def count_lines(path: Path) -> int:
    """Lines in a file, a torn last line included (it is quarantined when read)."""
    lines, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


@dataclasses.dataclass(frozen=True, slots=True)
class BadLine:
    """A spool line that is not a record: where it was, why, and its bytes."""

    offset: int
    reason: str
    raw: bytes

    def to_json(self, source: str) -> str:
        # surrogateescape keeps bytes that are not UTF-8: the quarantine holds the line
        # exactly as it was (`.encode("utf-8", "surrogateescape")` gives the bytes back)
        line = self.raw.decode("utf-8", "surrogateescape")
        return json.dumps(
            {"source": source, "offset": self.offset, "reason": self.reason, "line": line}
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    records: list[UsageRecord]
    bad: list[BadLine]
    end: int  # the byte offset the next batch starts from
    at_end: bool  # nothing left to read after `end`

    @property
    def consumed(self) -> int:
        return len(self.records) + len(self.bad)


def _parse(line: bytes) -> UsageRecord:
    return UsageRecord.from_json(line.decode("utf-8"))


def read_batch(path: Path, offset: int, limit: int, end: int | None = None) -> Batch:
    """Up to `limit` records from byte `offset`, reading no further than byte `end`.

    Raises OSError for the file as a whole; a line never raises: any line that does
    not give a record (not UTF-8, not JSON, not a record's fields, values that do not
    convert: a Decimal "1e" raises InvalidOperation, a UUID given as a number
    AttributeError) becomes a `BadLine`, and so does a torn last line (a crash
    mid-append) and a line longer than MAX_LINE_BYTES.
    """
    records: list[UsageRecord] = []
    bad: list[BadLine] = []
    stop = os.path.getsize(path) if end is None else end
    with open(path, "rb") as f:
        f.seek(offset)
        while len(records) < limit and offset < stop:
            line = f.readline(min(MAX_LINE_BYTES, stop - offset))
            if not line:
                break  # the file is shorter than it was said to be
            start, offset = offset, offset + len(line)
            if not line.endswith(b"\n"):
                if len(line) >= MAX_LINE_BYTES:
                    offset = _skip_rest_of_line(f, offset, stop)
                    bad.append(BadLine(start, "line too long", line[:4096]))
                else:
                    bad.append(BadLine(start, "torn line (no newline)", line))
                continue
            if not line.strip():
                continue
            try:
                records.append(_parse(line))
            except Exception as err:  # noqa: BLE001 - any error is this line's, not ours
                bad.append(BadLine(start, f"{type(err).__name__}: {err}"[:500], line))
        at_end = offset >= stop or not f.read(1)
    return Batch(records, bad, offset, at_end)


def _skip_rest_of_line(f: BinaryIO, offset: int, stop: int) -> int:
    while offset < stop:
        piece = f.readline(min(_CHUNK, stop - offset))
        if not piece:
            break
        offset += len(piece)
        if piece.endswith(b"\n"):
            break
    return offset
