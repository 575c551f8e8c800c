"""`costgate chaos --soak 30m --rps 100`: steady load for a long time, watching each
replica process's resident memory and open file descriptors (psutil) for leaks.

Bounded by duration and by count (rps x duration). A warm-up load runs first; then,
with no request in flight, a sample at rest; the soak's load with samples every
`sample_every_s`; and after it has drained, a last sample at rest. Growth is measured
between the two samples at rest (fds under load move with the connections open at that
instant); sockets are counted apart from the other fds. Samples go to stdout as they
are taken, so a log of a run cut short still holds the figures so far. At the end:
growth per replica (% RSS, fd delta) and the ledger check of the whole soak; RSS
growing 5% or more, or fds other than sockets growing at all, fails it. A replica that
Serve replaced mid-soak shows up as a new PID; its figures are shown, not judged.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import psutil

from gateway.devtools.chaos.bookkeeping import Context, expect_intact, finish, utcnow
from gateway.devtools.chaos.report import (
    Growth,
    ProcessSample,
    ScenarioResult,
    growth,
    render_growth,
    render_samples,
)


@dataclasses.dataclass(frozen=True)
class SoakSpec:
    duration_s: float
    rps: float
    sample_every_s: float = 60.0
    warmup_s: float = 30.0  # first sample after this: start-up allocations are not a leak
    concurrency: int = 64


MAX_RSS_GROWTH_PCT = 5.0  # the bar, warm baseline to the end, both at rest
REST_S = 5.0  # after a load drains, before a sample at rest: late closes land


def sample(pids: list[int], at_s: float, *, at_rest: bool = False) -> list[ProcessSample]:
    out = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                sockets = len(proc.net_connections(kind="all"))
                out.append(ProcessSample(at_s, pid, proc.memory_info().rss, proc.num_fds(),
                                         sockets, at_rest))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # gone between the listing and the sample: the next sample says
    return out


def run_soak(ctx: Context, spec: SoakSpec,
             on_sample: Callable[[list[ProcessSample], int], None] | None = None
             ) -> tuple[ScenarioResult, list[ProcessSample], list[Growth]]:
    name = "soak"
    started, since = time.monotonic(), utcnow()
    ctx.key(name)
    ctx.warm_keys()
    # start-up allocations and first connections are not a leak: warm up, drain, then
    # take the baseline with nothing in flight
    warm = ctx.load(name, duration_s=spec.warmup_s, rps=spec.rps, tag="warmup",
                    concurrency=spec.concurrency)  # fmt: skip
    warm_outcomes = warm.join()
    time.sleep(REST_S)
    t0 = time.monotonic()
    samples = sample(ctx.stack.replica_pids(), 0, at_rest=True)
    if on_sample is not None:
        on_sample(samples, warm.sent)
    run = ctx.load(name, duration_s=spec.duration_s, rps=spec.rps,
                   concurrency=spec.concurrency)  # fmt: skip
    next_at = spec.sample_every_s
    while True:
        elapsed = time.monotonic() - t0
        if elapsed >= spec.duration_s:
            break
        if elapsed >= next_at:
            taken = sample(ctx.stack.replica_pids(), round(elapsed))
            samples += taken
            if on_sample is not None:
                on_sample(taken, run.sent)
            next_at += spec.sample_every_s
        time.sleep(min(1.0, max(0.0, spec.duration_s - elapsed)))
    outcomes = run.join()
    time.sleep(REST_S)
    last = sample(ctx.stack.replica_pids(), round(time.monotonic() - t0), at_rest=True)
    samples += last
    if on_sample is not None:
        on_sample(last, warm.sent + run.sent)
    result, acc = finish(ctx, name, [*warm_outcomes, *outcomes], since, started)
    achieved = run.sent / max(1.0, spec.duration_s)
    result.notes.insert(0, f"{spec.duration_s:.0f} s at {spec.rps:.0f} rps asked, "
                           f"{achieved:.1f} rps sent")
    expect_intact(result, acc)
    grown = growth(samples)
    for g in grown:
        if not g.at_rest:
            continue  # a replica replaced mid-soak: its ends were not both at rest
        if g.rss_pct >= MAX_RSS_GROWTH_PCT:
            result.failures.append(f"pid {g.pid}: RSS grew {g.rss_pct:+.1f}% at rest")
        if g.other_fd_delta > 0:
            result.failures.append(f"pid {g.pid}: {g.other_fd_delta} more fds (not sockets) "
                                   "at rest")
    return result, samples, grown


def soak_report(result: ScenarioResult, samples: list[ProcessSample],
                grown: list[Growth]) -> str:
    return "\n".join([
        "replica RSS and open file descriptors over time:",
        render_samples(samples),
        "",
        "growth, first sample to last:",
        render_growth(grown),
    ])


_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """`30m`, `90s`, `1h`, `45` (seconds) -> seconds; ValueError otherwise."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:]) if value else None
    number = value[:-1] if unit else value
    seconds = float(number) * (unit or 1)
    if not seconds > 0:
        raise ValueError(f"not a positive duration: {text!r}")
    return seconds
