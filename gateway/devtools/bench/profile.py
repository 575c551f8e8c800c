"""`costgate bench --profile`: the CPU every process of the path spent per request.

On a shared machine requests/s move with the neighbours, CPU seconds per request much
less. Around each target's turn the bench reads the CPU time (user + system) of each
process category and divides the difference by the requests that turn sent:

- replicas, haproxy, ray (every other process of the Ray head `costgate up` started: GCS,
  raylet, dashboard, agents, Serve's controller...): the head's processes, found as
  `costgate down` finds them (gateway.control.ray_processes), by the state dir;
- sim: the process listening on the sim's port;
- client: the bench itself.

The processes are looked up again at every reading, so a HAProxy that Serve reloads or a
replica that restarts is counted from its start; a process that ended between two
readings takes its CPU with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import psutil

CATEGORIES = ("replicas", "haproxy", "ray", "sim", "client")
# (category, pid) -> CPU seconds so far
Reading = dict[tuple[str, int], float]
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


def category_of(argv: list[str], name: str) -> str:
    """A process of the Ray head, by what it runs."""
    if "ServeReplica" in " ".join(argv):
        return "replicas"
    if name == "haproxy" or (argv and Path(argv[0]).name == "haproxy"):
        return "haproxy"
    return "ray"


def listening_pid(port: int) -> int | None:
    """The pid of this user's process that listens on `port` over TCP, if any."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            return int(conn.pid) if conn.pid else None
    return None


def _cpu(proc: psutil.Process) -> float | None:
    try:
        times = proc.cpu_times()
    except _GONE:
        return None
    return float(times.user + times.system)


class ProcessMeter:
    """Reads the CPU seconds of every process of each category (`read`)."""

    def __init__(self, state_dir: Path | None, sim_url: str | None) -> None:
        self._temp_dir: Path | None = None
        self._session: int | None = None
        if state_dir is not None:
            from gateway.control.cluster import ClusterPaths, head_session

            paths = ClusterPaths(state_dir)
            self._temp_dir, self._session = paths.temp_dir, head_session(paths)
        port = urlsplit(sim_url).port if sim_url else None
        self._sim = listening_pid(port) if port else None

    def read(self) -> Reading:
        from gateway.control.ray_processes import cluster_processes

        found: list[tuple[str, psutil.Process]] = [("client", psutil.Process(os.getpid()))]
        if self._sim is not None and psutil.pid_exists(self._sim):
            found.append(("sim", psutil.Process(self._sim)))
        if self._temp_dir is not None:
            for proc in cluster_processes(self._temp_dir, self._session):
                try:
                    found.append((category_of(proc.cmdline(), proc.name()), proc))
                except _GONE:
                    continue
        reading: Reading = {}
        for category, proc in found:
            seconds = _cpu(proc)
            if seconds is not None:
                reading[(category, proc.pid)] = seconds
        return reading


def add(total: dict[str, float], before: Reading, after: Reading) -> None:
    """Add the CPU seconds spent between two readings to `total`, by category."""
    for key, seconds in after.items():
        total[key[0]] = total.get(key[0], 0.0) + max(0.0, seconds - before.get(key, 0.0))


Meter = Callable[[], Reading]
