"""The head's folders in /tmp (Ray's temp dir, HAProxy's) cannot be predicted by another
user on the machine: their names carry a random part kept in the state dir."""

from __future__ import annotations

import hashlib
import shutil
import stat
from pathlib import Path

from gateway.control.cluster import ClusterPaths
from gateway.domain.environment import TEMP_SUFFIX_FILE


def test_the_temp_dirs_are_random_per_state_dir_and_stable_for_it(tmp_path: Path) -> None:
    a, b = ClusterPaths(tmp_path / "a"), ClusterPaths(tmp_path / "b")
    assert a.temp_dir != b.temp_dir
    assert a.temp_dir == ClusterPaths(tmp_path / "a").temp_dir  # read back, not made anew
    digest = hashlib.sha1(str((tmp_path / "a").resolve()).encode()).hexdigest()[:10]
    assert digest not in str(a.temp_dir)  # not derivable from the state dir's path
    suffix = a.temp_dir.name.rsplit("-", 1)[-1]
    assert a.haproxy_dir == Path("/tmp") / f"cgh-{suffix}"
    kept = tmp_path / "a" / TEMP_SUFFIX_FILE
    assert kept.read_text() == suffix and stat.S_IMODE(kept.stat().st_mode) == 0o600


def test_a_head_started_before_keeps_its_digest_named_temp_dir(tmp_path: Path) -> None:
    state = tmp_path / "old"
    digest = hashlib.sha1(str(state.resolve()).encode()).hexdigest()[:10]
    running = Path("/tmp") / f"costgate-ray-{digest}"
    running.mkdir()
    try:
        assert ClusterPaths(state).temp_dir == running
    finally:
        shutil.rmtree(running)
    assert ClusterPaths(state).temp_dir == running  # kept while the state dir says so
