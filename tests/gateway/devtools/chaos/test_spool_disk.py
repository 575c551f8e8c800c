"""The size-limited spool directory: a real tmpfs, really full (needs mount: root)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from gateway.devtools.chaos.spool_disk import SpoolDisk, SpoolDiskError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def test_writes_past_its_size_fail_with_enospc_and_it_unmounts(tmp_path: Path) -> None:
    spool = tmp_path / "state" / "spool"
    disk = SpoolDisk(spool, 16).mount()
    try:
        used, total = disk.usage()
        assert total == 16 * 1024 and used == 0
        with pytest.raises(OSError) as err, open(spool / "usage-spool-1-x.jsonl", "wb") as f:
            for _ in range(64):
                f.write(b"x" * 1024)
                f.flush()
        assert err.value.errno == errno.ENOSPC
        assert disk.files()[0].startswith("usage-spool-1-x.jsonl (")
    finally:
        disk.unmount()
    assert not os.path.ismount(spool)
    assert list(spool.iterdir()) == []  # what was written lived on the tmpfs only


def test_a_failed_mount_says_so(tmp_path: Path) -> None:
    with pytest.raises(SpoolDiskError, match="cannot mount"):
        SpoolDisk(tmp_path / "spool", -1).mount()
