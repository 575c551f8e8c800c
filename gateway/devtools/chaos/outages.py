"""Scenarios 3, 4 and 7: PostgreSQL cut under load, a replica SIGKILLed (with the database
up, and during an outage), and a fifth of upstream calls failing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

from gateway.devtools.chaos.bookkeeping import (
    FLUSH_INTERVAL_S,
    Context,
    expect,
    expect_intact,
    finish,
    utcnow,
)
from gateway.devtools.chaos.ledger import Accounting
from gateway.devtools.chaos.load import Outcome
from gateway.devtools.chaos.report import ScenarioResult

# the sim's fault kinds a fault scenario mixes, and their options
FAULT_MIX: dict[str, dict[str, float]] = {
    "error_500": {},
    "error_503": {},
    "rate_limit": {"retry_after_s": 1},
    "reset": {},
    "malformed": {},
    "mid_stream_reset": {},
    "hang": {"hang_s": 30},  # past the provider's read timeout: the gateway gives up first
}


def _writer_note(stats: dict[str, float]) -> str:
    keys = ("queued_rows", "written_rows", "spooled_rows", "dropped_rows", "buffer_rows",
            "spool_rows")  # fmt: skip
    shown = ", ".join(f"{k.removesuffix('_rows')} {stats[k]:.0f}" for k in keys if k in stats)
    return f"writers (live replicas, /metrics): {shown or 'unavailable'}"


def db_cut(ctx: Context) -> ScenarioResult:
    name = "db-cut"
    started, since = time.monotonic(), utcnow()
    lead = max(2.0, ctx.sizes.load_s / 4)
    run = ctx.load(name, duration_s=lead + ctx.sizes.outage_s + lead)
    time.sleep(lead)
    proxy = ctx.stack.proxy
    assert proxy is not None
    proxy.block()
    blocked = time.monotonic()
    try:
        time.sleep(ctx.sizes.outage_s)
        during = ctx.stack.writer_stats()
    finally:
        proxy.unblock()
    cut_s = time.monotonic() - blocked
    outcomes = run.join()
    result, acc = finish(ctx, name, outcomes, since, started)
    result.notes.insert(0, f"PostgreSQL cut for {cut_s:.1f} s under {ctx.sizes.rps:.0f} rps; "
                           f"at the end of the cut: {_writer_note(during)}")
    result.notes.append("after: " + _writer_note(ctx.stack.writer_stats()))
    expect_intact(result, acc)
    return result


def _lost_window(acc: Accounting, outcomes: Sequence[Outcome], killed_at: float) -> str:
    ended = {o.request_id: o.ended for o in outcomes if o.request_id}
    times = sorted(ended[i] - killed_at for i in acc.lost if i in ended)
    if not times:
        return ""
    return (f"lost rows belong to requests answered {times[0]:+.2f} s to {times[-1]:+.2f} s "
            "from the kill")


def replica_kill(ctx: Context, *, during_outage: bool = False) -> ScenarioResult:
    name = "replica-kill-db-down" if during_outage else "replica-kill"
    started, since = time.monotonic(), utcnow()
    stack, proxy = ctx.stack, ctx.stack.proxy
    assert proxy is not None
    pids = stack.replica_pids()
    if not pids:
        raise RuntimeError("no running replica to kill (Serve's API listed none)")
    victim = pids[0]
    load_s = ctx.sizes.load_s
    run = ctx.load(name, duration_s=load_s)
    time.sleep(load_s / 4)
    if during_outage:
        proxy.block()
        time.sleep(load_s / 4)  # rows of the outage wait in the replicas' memory now
    os.kill(victim, signal.SIGKILL)
    killed_at = time.time()
    try:
        time.sleep(load_s / 4)
    finally:
        proxy.unblock()
    outcomes = run.join()
    replaced = stack.wait_replicas(len(pids), exclude=frozenset({victim}))
    result, acc = finish(ctx, name, outcomes, since, started)
    bound = int(ctx.sizes.rps * FLUSH_INTERVAL_S) + 1
    result.notes.insert(0, f"SIGKILL of replica pid {victim} (replicas now {replaced}); "
                           f"allowed loss: one flush interval ({FLUSH_INTERVAL_S} s) = {bound} rows"
                           + ("; PostgreSQL cut from before the kill until after it"
                              if during_outage else ""))  # fmt: skip
    window = _lost_window(acc, outcomes, killed_at)
    if window:
        result.notes.append(window)
    expect(result, acc.lost_count <= bound,
           f"{acc.lost_count} answered requests lost their rows, more than one flush "
           f"interval's {bound}")
    expect(result, acc.duplicated == 0, f"{acc.duplicated} duplicated rows")
    expect(result, not acc.differing, f"{len(acc.differing)} rows differ from their answers")
    refused = sum(1 for o in outcomes if o.status == 401)
    if refused:
        result.notes.append(f"{refused} requests refused 401 with a valid key (a replica "
                            "that started while PostgreSQL was away knows no keys)")
    return result


def upstream_faults(ctx: Context) -> ScenarioResult:
    name = "upstream-faults"
    started, since = time.monotonic(), utcnow()
    sim = ctx.stack.sim
    assert sim is not None
    share = ctx.sizes.fault_rate / len(FAULT_MIX)
    for kind, options in FAULT_MIX.items():
        sim.set_fault("*", kind, share, **options)
    try:
        outcomes = ctx.load(name, duration_s=ctx.sizes.load_s * 1.5, model="auto").join()
        fired = sim.stats().get("faults", {})
    finally:
        sim.clear_faults()
    result, acc = finish(ctx, name, outcomes, since, started)
    result.notes.insert(0, f"{ctx.sizes.fault_rate:.0%} of upstream calls fail "
                           f"({', '.join(FAULT_MIX)}); fired: {fired}")
    if acc.answered_5xx:
        result.notes.append(f"{acc.answered_5xx / max(1, acc.sent):.1%} of requests answered "
                            "5xx after retries and fallbacks")
    expect_intact(result, acc)
    expect(result, not acc.missing_error_rows,
           f"{len(acc.missing_error_rows)} error answers have no row")
    return result
