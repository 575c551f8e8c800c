"""Finding one node's processes, Ray's retitled agents included (no Ray needed)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gateway.control.ray_processes import (
    CLUSTER_MARKER_ENV,
    Stopped,
    cluster_processes,
    stop_processes,
)

# what Ray's agents do: retitle themselves (zeroing their environment block), keep a log
# file open in the node's temp dir, and ignore SIGTERM
AGENT = """
import signal, sys, time, ray._raylet as r
log = open(sys.argv[1], "a")
signal.signal(signal.SIGTERM, signal.SIG_IGN)
r.setproctitle("ray::DashboardAgent")
print("ready", flush=True)
time.sleep(120)
"""
# a raylet stand-in: starts one agent, says its pid, waits
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE)
assert child.stdout.readline().strip() == b"ready"
print(child.pid, flush=True)
time.sleep(120)
"""


def _env(temp_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != CLUSTER_MARKER_ENV}
    if temp_dir is not None:
        env[CLUSTER_MARKER_ENV] = str(temp_dir)
    return env


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait(timeout=10)


def _agent(started: list[subprocess.Popen[bytes]], log: Path, temp_dir: Path | None) -> int:
    proc = subprocess.Popen([sys.executable, "-c", AGENT, str(log)], env=_env(temp_dir),
                            stdout=subprocess.PIPE)  # fmt: skip
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc.pid


def test_an_agent_whose_title_zeroed_its_marker_is_found_as_our_process_child(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    ours = tmp_path / "ray-ours"
    ours.mkdir()
    elsewhere = tmp_path / "logs-elsewhere.out"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, AGENT, str(elsewhere)],
                              env=_env(ours), stdout=subprocess.PIPE)  # fmt: skip
    started.append(parent)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        agent = psutil.Process(child)
        assert agent.cmdline()[0] == "ray::DashboardAgent"
        assert CLUSTER_MARKER_ENV not in agent.environ()  # what hid it from `down`
        assert {p.pid for p in cluster_processes(ours)} == {parent.pid, child}
    finally:
        psutil.Process(child).kill()


def test_an_orphaned_agent_is_found_by_the_files_it_holds_in_our_temp_dir(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    ours, theirs = tmp_path / "ray-ours", tmp_path / "ray-theirs"
    ours.mkdir()
    theirs.mkdir()
    orphan = _agent(started, ours / "dashboard_agent.out", None)
    other = _agent(started, theirs / "dashboard_agent.out", None)  # another Ray's agent
    found = {p.pid for p in cluster_processes(ours)}
    assert orphan in found and other not in found
    # a prefix of our dir is not our dir
    assert other not in {p.pid for p in cluster_processes(tmp_path / "ray-the")}


def test_stop_kills_an_agent_that_ignores_sigterm(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    ours = tmp_path / "ray-ours"
    ours.mkdir()
    orphan = _agent(started, ours / "runtime_env_agent.out", ours)
    agent = psutil.Process(orphan)
    assert stop_processes(ours, grace_s=0.5) == Stopped(1)
    # stop_processes reaped its exit status (it is our child here): it is simply gone
    assert not agent.is_running()
    assert not cluster_processes(ours)


# what `ray start` leaves: a leader that exits, and daemons in its session, one of them
# retitled (no marker, no file of ours open, parented to init) and ignoring SIGTERM
SESSION = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
assert child.stdout.readline().strip() == b"ready"
print(child.pid, flush=True)
"""


def test_a_process_of_the_heads_session_is_found_and_stopped_whatever_it_calls_itself(
    tmp_path: Path,
) -> None:
    ours = tmp_path / "ray-ours"
    ours.mkdir()
    leader = subprocess.Popen([sys.executable, "-c", SESSION, AGENT, str(tmp_path / "x.out")],
                              env=_env(None), stdout=subprocess.PIPE,
                              start_new_session=True)  # fmt: skip
    assert leader.stdout is not None
    daemon = int(leader.stdout.readline())
    leader.wait(timeout=30)  # the leader is gone, as `ray start` is once it returns
    try:
        assert daemon not in {p.pid for p in cluster_processes(ours)}  # no marker, no file
        assert {p.pid for p in cluster_processes(ours, session=leader.pid)} == {daemon}
        stopped = stop_processes(ours, grace_s=0.5, session=leader.pid)
        assert stopped == Stopped(1)
        assert not psutil.pid_exists(daemon) or psutil.Process(daemon).status() == "zombie"
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(daemon).kill()


def test_a_session_id_whose_leader_is_another_live_session_is_not_ours(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    ours = tmp_path / "ray-ours"
    ours.mkdir()
    # a live session leader that is not ours: its session id names nothing of the head
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             env=_env(None), start_new_session=True)  # fmt: skip
    started.append(other)
    assert not cluster_processes(ours, session=other.pid)
    assert stop_processes(ours, grace_s=0.5, session=other.pid) == Stopped(0)
    assert other.poll() is None
