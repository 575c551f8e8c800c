"""Which processes on this machine belong to one of our Ray nodes, and stopping them.

Ray's own stop command kills every Ray on the host, other users' included; ours finds the
processes of one node by what only they share:

- their session: `ray start` runs as the leader of a new session (`start_new_session`),
  and every process it starts (GCS, raylet, dashboard, agents, workers, HAProxy) stays in
  it; the session id is recorded with the node. Ray's workers change their process group,
  never their session, so this holds for every process of the node, whatever it calls
  itself and whoever its parent is now;
- CLUSTER_MARKER_ENV, set to the node's temp dir in the environment of `ray start` and
  inherited by what it starts, and the temp dir on their command lines (nodes recorded
  before the session was);
- Ray's agents retitle themselves with setproctitle, which zeroes the start of their
  environment block, the marker with it: they are found as the children of a process of
  ours, or, orphaned by a raylet that died first, by the log files they hold open in our
  temp dir.

A session id is a process id: once its leader (`ray start`, which exits) is gone, the
number may be reused, and only a new session leader with that same pid could carry it.
A live leader that is not one of ours means the id is someone else's, and it is ignored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil

CLUSTER_MARKER_ENV = "COSTGATE_RAY_TEMP_DIR"
TITLED_PREFIX = "ray::"  # the process title Ray's agents and workers give themselves
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)
# how long `stop_processes` keeps looking for what is left, SIGKILLs included: a raylet
# may start a worker while its siblings are being stopped
STOP_DEADLINE_S = 30.0
_POLL_S = 0.1


@dataclasses.dataclass(frozen=True)
class Stopped:
    """What a stop did: how many processes it found, and which pids are still running."""

    count: int
    remaining: tuple[int, ...] = ()


def read_record(path: Path) -> dict[str, Any]:
    """A node's JSON record (temp dir, session...); empty when missing or unreadable."""
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads(path.read_text()))
    return {}


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def cluster_processes(temp_dir: Path, session: int | None = None) -> list[psutil.Process]:
    """Every process of the node started with this temp dir (and in `session`, when
    given), and nothing else."""
    marker = str(temp_dir)
    found: dict[int, psutil.Process] = {}
    titled: list[psutil.Process] = []
    in_session: list[psutil.Process] = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            argv = proc.info["cmdline"] or []
            if marker in " ".join(argv) or proc.environ().get(CLUSTER_MARKER_ENV) == marker:
                found[proc.pid] = proc
            elif session is not None and _session_of(proc.pid) == session:
                in_session.append(proc)
            elif argv and argv[0].startswith(TITLED_PREFIX):
                titled.append(proc)  # another Ray's, or one of ours that lost its marker
        except _GONE:
            continue
    if in_session and _session_is_ours(session, found):
        found.update((p.pid, p) for p in in_session)
    for proc in titled:
        try:
            if any(p.pid in found for p in proc.parents()) or _holds_files_in(proc, marker):
                found[proc.pid] = proc
        except _GONE:
            continue
    return list(found.values())


def _session_is_ours(session: int | None, found: dict[int, psutil.Process]) -> bool:
    """False when the session's id now leads a live session that is not the node's."""
    if session is None:
        return False
    if session in found or not psutil.pid_exists(session):
        return True
    return _session_of(session) != session  # alive, but no session leader: not a reuse


def _holds_files_in(proc: psutil.Process, marker: str) -> bool:
    inside = marker.rstrip("/") + "/"
    return any(f.path.startswith(inside) for f in proc.open_files())


def _running(proc: psutil.Process) -> bool:
    """Alive and not a zombie: a zombie holds no port, file or memory any more."""
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except _GONE:
        return False


def wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait until none of `procs` runs, or `timeout_s`; return those still running.
    Our own children are reaped on the way (psutil's wait), others polled."""
    deadline = time.monotonic() + timeout_s
    alive = list(procs)
    while alive:
        for proc in alive:
            with contextlib.suppress(psutil.TimeoutExpired, *_GONE):
                proc.wait(timeout=0)  # reaps our own children; others raise at once
        alive = [p for p in alive if _running(p)]
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_S)
    return alive


def send_signal(procs: list[psutil.Process], sig: signal.Signals) -> None:
    for proc in procs:
        with contextlib.suppress(*_GONE):
            proc.send_signal(sig)


def stop_processes(
    temp_dir: Path,
    grace_s: float = 10.0,
    *,
    session: int | None = None,
    deadline_s: float = STOP_DEADLINE_S,
) -> Stopped:
    """SIGTERM every process of the node, SIGKILL what is left after `grace_s`, and look
    again until none is found or `deadline_s` has passed (a process started meanwhile is
    stopped too). Returns only once they are gone, or says which pids remain."""
    deadline = time.monotonic() + deadline_s
    seen: set[int] = set()
    procs = [p for p in cluster_processes(temp_dir, session) if _running(p)]
    while procs:
        seen.update(p.pid for p in procs)
        send_signal(procs, signal.SIGTERM)
        alive = wait_gone(procs, min(grace_s, max(0.0, deadline - time.monotonic())))
        send_signal(alive, signal.SIGKILL)
        wait_gone(alive, max(0.0, min(5.0, deadline - time.monotonic())))
        procs = [p for p in cluster_processes(temp_dir, session) if _running(p)]
        if time.monotonic() >= deadline:
            break
    return Stopped(len(seen | {p.pid for p in procs}), tuple(sorted(p.pid for p in procs)))
