"""The tables `costgate chaos` prints: one line per scenario, and the soak's samples.

Pure text from results, so the format is tested without a stack.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence

# what Serve's controller logs when a replica is stopped for it, not by its own shutdown
CONTROLLER_EVENTS = ("force-killing", "failed health check", "died")


@dataclasses.dataclass
class ScenarioResult:
    """What one scenario did and saw; `failures` are its expectations that did not hold."""

    name: str
    sent: int = 0
    answered_2xx: int = 0
    answered_4xx: int = 0
    answered_5xx: int = 0
    no_answer: int = 0
    rows: int = 0
    lost: int = 0
    duplicated: int = 0
    differing: int = 0
    seconds: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None  # the scenario could not run to its end
    details: dict[str, object] = dataclasses.field(default_factory=dict)  # per case, for JSON

    @property
    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        return "FAIL" if self.failures else "ok"


COLUMNS = ("scenario", "sent", "2xx", "4xx", "5xx", "no answer", "rows", "lost", "dup",
           "differ", "s", "result")  # fmt: skip


def _cells(r: ScenarioResult) -> tuple[str, ...]:
    return (r.name, str(r.sent), str(r.answered_2xx), str(r.answered_4xx),
            str(r.answered_5xx), str(r.no_answer), str(r.rows), str(r.lost),
            str(r.duplicated), str(r.differing), f"{r.seconds:.0f}", r.verdict)  # fmt: skip


def render_table(results: Sequence[ScenarioResult]) -> str:
    """Aligned columns (numbers to the right), then each scenario's notes and failures."""
    rows = [COLUMNS, *(_cells(r) for r in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(
            cell.ljust(w) if i == 0 or i == len(row) - 1 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()

    out = [line(COLUMNS), "  ".join("-" * w for w in widths)]
    out += [line(_cells(r)) for r in results]
    details = []
    for r in results:
        for note in r.notes:
            details.append(f"  {r.name}: {note}")
        for failure in r.failures:
            details.append(f"  {r.name}: FAIL {failure}")
        if r.error:
            details.append(f"  {r.name}: ERROR {r.error}")
    if details:
        out += ["", "notes:", *details]
    return "\n".join(out)


@dataclasses.dataclass(frozen=True)
class ProcessSample:
    at_s: float  # seconds since the soak started
    pid: int
    rss_bytes: int
    fds: int
    sockets: int = 0  # of the fds: open connections come and go with the load
    at_rest: bool = False  # taken with no request in flight


@dataclasses.dataclass(frozen=True)
class Growth:
    pid: int
    first_rss: int
    last_rss: int
    rss_pct: float
    fd_delta: int
    samples: int
    other_fd_delta: int = 0  # files, pipes, epoll: the fds a leak would grow
    at_rest: bool = False  # both ends were taken with no request in flight


def growth(samples: Sequence[ProcessSample]) -> list[Growth]:
    """Per replica, first sample to last: % RSS growth and file descriptor change.

    When a replica has samples taken at rest (no request in flight), growth is measured
    between the first and last of those: under load, the fd count moves with the
    connections open at that instant, which says nothing about a leak."""
    by_pid: dict[int, list[ProcessSample]] = {}
    for s in sorted(samples, key=lambda s: s.at_s):
        by_pid.setdefault(s.pid, []).append(s)
    out = []
    for pid, series in sorted(by_pid.items()):
        rest = [s for s in series if s.at_rest]
        ends = rest if len(rest) >= 2 else series
        first, last = ends[0], ends[-1]
        change = last.rss_bytes - first.rss_bytes
        pct = 100.0 * change / first.rss_bytes if first.rss_bytes else 0.0
        other = (last.fds - last.sockets) - (first.fds - first.sockets)
        out.append(Growth(pid, first.rss_bytes, last.rss_bytes, pct, last.fds - first.fds,
                          len(series), other, ends is rest))
    return out


def render_samples(samples: Sequence[ProcessSample]) -> str:
    """One line per sampling time: each replica's RSS (MiB) and open fds."""
    pids = sorted({s.pid for s in samples})
    times = sorted({s.at_s for s in samples})
    cell = {(s.at_s, s.pid): s for s in samples}
    head = ["t (s)", *(f"pid {p} RSS MiB / fds" for p in pids)]
    lines = [head]
    for t in times:
        row = [f"{t:.0f}"]
        for p in pids:
            s = cell.get((t, p))
            row.append("-" if s is None else f"{s.rss_bytes / 2**20:.1f} / {s.fds}")
        lines.append(row)
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in lines)


def render_growth(rows: Sequence[Growth]) -> str:
    return "\n".join(
        f"pid {g.pid}: RSS {g.first_rss / 2**20:.1f} -> {g.last_rss / 2**20:.1f} MiB "
        f"({g.rss_pct:+.1f}%), fds {g.fd_delta:+d} (not sockets {g.other_fd_delta:+d}), "
        f"{g.samples} samples{', ends at rest' if g.at_rest else ''}"
        for g in rows
    )


def controller_events(lines: Iterable[str], since: float) -> list[str]:
    """The lines of Serve's controller log from `since` (Unix time) on about replicas that
    did not end on their own: force-kills, failed health checks, deaths."""
    return [line[:300] for line in lines
            if any(m in line for m in CONTROLLER_EVENTS) and logged_at(line) >= since]  # fmt: skip


def logged_at(line: str) -> float:
    """A Serve log line's local time (`INFO 2026-12-05 14:28:04,683 ...`); 0: none."""
    parts = line.split(" ", 3)
    try:
        return time.mktime(time.strptime(f"{parts[1]} {parts[2][:8]}", "%Y-%m-%d %H:%M:%S"))
    except (IndexError, ValueError):
        return 0.0
