"""A size-limited file system over the spool directory, for scenario 8 (the disk is full).

A tmpfs mounted on `<state dir>/spool`, filled up to a few KiB: the replicas' writes then fail
with ENOSPC, as they would on a full disk, without filling a disk anyone shares. It needs
`mount` (root, or CAP_SYS_ADMIN); where that is refused, the scenario says so instead of
pretending: a per-process file size limit (RLIMIT_FSIZE) would hit the replicas' logs too,
and a directory quota needs a file system set up for it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FILLER = "filler.bin"  # not a spool file name: no writer reads it


class SpoolDiskError(RuntimeError):
    pass


class SpoolDisk:
    def __init__(self, path: Path, size_kib: int) -> None:
        self.path = path
        self.size_kib = size_kib
        self.mounted = False

    def mount(self) -> SpoolDisk:
        self.path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size_kib}k,mode=0755", "tmpfs",
             str(self.path)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SpoolDiskError(f"cannot mount a {self.size_kib} KiB tmpfs on {self.path} "
                                 f"({done.stderr.strip() or done.returncode}); needs root")
        self.mounted = True
        return self

    def fill(self, leave_kib: int) -> None:
        """Take all the free space but `leave_kib` with a filler file (the disk fills)."""
        free = shutil.disk_usage(self.path).free - leave_kib * 1024
        with open(self.path / FILLER, "wb", buffering=0) as f:
            block = b"\0" * 65536
            while free > 0:
                free -= f.write(block[: min(len(block), free)])

    def usage(self) -> tuple[int, int]:
        """(bytes used, bytes in all)."""
        total, used, _ = shutil.disk_usage(self.path)
        return used, total

    def files(self) -> list[str]:
        """Each file as `name (bytes)`."""
        return sorted(f"{p.name} ({p.stat().st_size} B)" for p in self.path.glob("*")
                      if p.name != FILLER)  # fmt: skip

    def unmount(self) -> None:
        """Unmount; a replica still holding a file open makes it a lazy unmount."""
        if not self.mounted:
            return
        done = subprocess.run(["umount", str(self.path)], capture_output=True, timeout=30,
                              check=False)  # fmt: skip
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=30,
                           check=False)  # fmt: skip
        self.mounted = False
