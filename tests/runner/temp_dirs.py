"""No folder a test run's Ray heads keep in /tmp outlives the run.

A head keeps its temp dir (Ray's sockets and session logs) and HAProxy's files in /tmp,
named by a random suffix that its state dir keeps (`private_temp_suffix`). `costgate
down` leaves them, as Ray leaves its own, for the logs. A test's state dir lives under
pytest's base temp dir, and pytest removes it some runs later, so nothing could find those
folders again: the suite left 21 of them, 5-35 MB, per run.

So at the end of each session (each xdist worker, after its fixtures are torn down, so
every head it started is down), the folders of the state dirs under the session's base
temp dir are removed. A folder that a process still runs from is kept.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gateway.control.cluster import ClusterPaths
from gateway.control.ray_processes import cluster_processes
from gateway.domain.environment import TEMP_SUFFIX_FILE


def remove_left_folders(base: Path) -> list[Path]:
    """Remove the /tmp folders of the Ray heads whose state dirs are under `base` and
    whose processes are all gone; return the folders removed."""
    try:
        markers = sorted(base.rglob(TEMP_SUFFIX_FILE))
    except OSError:  # the base itself unreadable (pathlib skips unreadable folders below it)
        markers = []
    removed: list[Path] = []
    for marker in markers:
        paths = ClusterPaths(marker.parent)
        removed += remove_unused(paths.temp_dir, paths.haproxy_dir)
    return removed


def remove_unused(temp_dir: Path, haproxy_dir: Path) -> list[Path]:
    """Remove one Ray node's folders (its temp dir, HAProxy's) unless a process still
    runs from them; return the folders removed. A worker node's are not under a state
    dir's suffix (its record names them, and goes when it leaves): its test calls this."""
    folders = [f for f in (temp_dir, haproxy_dir) if f.exists()]
    if not folders or cluster_processes(temp_dir):
        return []
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return folders


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # pytest's own factory (tmp_path_factory's): a session that made no temp dir (the
    # xdist controller) has no base temp dir, and must not make one here
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or getattr(factory, "_basetemp", None) is None:
        return
    remove_left_folders(factory.getbasetemp())
