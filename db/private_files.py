"""Small files only this user may read, replaced whole: the replicas' last known keys and
budgets beside the state dir, for a start while PostgreSQL is away."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, data: bytes) -> None:
    """`data` at `path`, mode 0600, durable; readers see the old file or the new, never
    half of one. Raises OSError."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing temp file keeps its mode through O_CREAT
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
