"""Which processes on this machine belong to one of our Ray nodes, and stopping them.

Ray's own stop command kills every Ray on the host, other users' included; ours finds the
processes of one node by its temp dir. `ray start` runs with CLUSTER_MARKER_ENV set to
that dir, and the processes it starts (GCS, raylet, dashboard, client server, workers)
inherit it; some name the temp dir on their command line too.

Ray's agents (DashboardAgent, RuntimeEnvAgent) are the exception: they retitle
themselves with setproctitle, which zeroes the start of their environment block, the
marker with it. `costgate down` missed them, and they outlived their raylet, parented to
init, ignoring SIGTERM (seen on these machines). They are found as the children of a
process of ours, or, orphaned by a raylet that died first, by the log files they hold
open in our temp dir.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import psutil

CLUSTER_MARKER_ENV = "COSTGATE_RAY_TEMP_DIR"
TITLED_PREFIX = "ray::"  # the process title Ray's agents and workers give themselves
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


def cluster_processes(temp_dir: Path) -> list[psutil.Process]:
    """Every process of the node started with this temp dir, and nothing else."""
    marker = str(temp_dir)
    found: dict[int, psutil.Process] = {}
    titled: list[psutil.Process] = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            argv = proc.info["cmdline"] or []
            if marker in " ".join(argv) or proc.environ().get(CLUSTER_MARKER_ENV) == marker:
                found[proc.pid] = proc
            elif argv and argv[0].startswith(TITLED_PREFIX):
                titled.append(proc)  # another Ray's, or one of ours that lost its marker
        except _GONE:
            continue
    for proc in titled:
        try:
            if any(p.pid in found for p in proc.parents()) or _holds_files_in(proc, marker):
                found[proc.pid] = proc
        except _GONE:
            continue
    return list(found.values())


def _holds_files_in(proc: psutil.Process, marker: str) -> bool:
    inside = marker.rstrip("/") + "/"
    return any(f.path.startswith(inside) for f in proc.open_files())


def stop_processes(temp_dir: Path, grace_s: float = 10.0) -> int:
    """SIGTERM, then SIGKILL after `grace_s`, to every process under one node's temp dir."""
    procs = cluster_processes(temp_dir)
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)
    return len(procs)
