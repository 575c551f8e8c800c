"""The /tmp folders of a run's Ray heads go at the end of the run, unless still in use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from gateway.control.cluster import ClusterPaths
from gateway.control.ray_processes import CLUSTER_MARKER_ENV
from tests.runner.temp_dirs import remove_left_folders


def _head_folders(state_dir: Path) -> ClusterPaths:
    paths = ClusterPaths(state_dir)  # makes the state dir's suffix, as `costgate up` does
    for folder in (paths.temp_dir, paths.haproxy_dir):
        (folder / "logs").mkdir(parents=True)
        (folder / "logs" / "raylet.out").write_text("a log line\n")
    return paths


def test_the_folders_of_a_stopped_head_go_and_a_running_heads_stay(tmp_path: Path) -> None:
    base = tmp_path / "base"
    stopped = _head_folders(base / "a" / "state")
    running = _head_folders(base / "b" / "state")
    other_run = _head_folders(tmp_path / "elsewhere" / "state")
    # a process of the running head, marked as `costgate up` marks Ray's processes
    env = {**os.environ, CLUSTER_MARKER_ENV: str(running.temp_dir)}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        removed = remove_left_folders(base)
        assert sorted(removed) == sorted([stopped.temp_dir, stopped.haproxy_dir])
        assert not stopped.temp_dir.exists() and not stopped.haproxy_dir.exists()
        assert running.temp_dir.exists() and running.haproxy_dir.exists()
    finally:
        proc.kill()
        proc.wait()
    try:
        gone = remove_left_folders(base)
        assert sorted(gone) == sorted([running.temp_dir, running.haproxy_dir])
        # a state dir outside the base (another run's) keeps its folders
        assert other_run.temp_dir.exists() and other_run.haproxy_dir.exists()
    finally:
        for folder in (other_run.temp_dir, other_run.haproxy_dir, running.temp_dir):
            shutil.rmtree(folder, ignore_errors=True)
