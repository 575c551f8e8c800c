"""Peak resident memory of some processes while something runs: what a giant body costs
the replicas (and Serve's HTTP proxy, which reads the body before a replica sees it)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil

from gateway.control.cluster import ClusterPaths
from gateway.control.ray_processes import cluster_processes

MIB = 2**20


@dataclasses.dataclass
class Growth:
    label: str
    pid: int
    before: int  # bytes
    peak: int

    @property
    def grew_mib(self) -> float:
        return (self.peak - self.before) / MIB

    def render(self) -> str:
        return (f"{self.label} {self.pid}: RSS {self.before / MIB:.1f} -> peak "
                f"{self.peak / MIB:.1f} MiB (+{self.grew_mib:.1f})")  # fmt: skip


def proxy_pids(state_dir: Path) -> list[int]:
    """Serve's HTTP proxies of the head started under `state_dir`."""
    found = []
    for proc in cluster_processes(ClusterPaths(state_dir).temp_dir):
        with contextlib.suppress(psutil.Error):
            if "ProxyActor" in " ".join(proc.cmdline()):
                found.append(proc.pid)
    return sorted(found)


@contextlib.contextmanager
def watch_rss(targets: dict[int, str], every_s: float = 0.02) -> Iterator[list[Growth]]:
    """Sample the RSS of `targets` (pid -> label) until the block ends; the list yielded
    is filled in then, one entry per process that could be read."""
    procs: dict[int, psutil.Process] = {}
    growth: dict[int, Growth] = {}
    for pid, label in targets.items():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            rss = proc.memory_info().rss
            procs[pid], growth[pid] = proc, Growth(label, pid, rss, rss)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for pid, proc in procs.items():
                with contextlib.suppress(psutil.Error):
                    g = growth[pid]
                    g.peak = max(g.peak, proc.memory_info().rss)
            stop.wait(every_s)

    thread = threading.Thread(target=sample, name="rss-watch", daemon=True)
    out: list[Growth] = []
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join(timeout=5)
        out.extend(growth.values())
