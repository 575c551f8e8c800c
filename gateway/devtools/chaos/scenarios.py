"""The scenarios in the order a run takes them, and the run: each scenario gets a fresh
app (and key), and the stack is put back together after it (database reachable, upstream
faults off, every replica running), so one scenario's damage never counts in the next.

The order puts the gentle ones first and `down` last: it takes the gateway away, and
bringing it back costs a whole `costgate up`.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence

from gateway.devtools.chaos import deploys, hostile, outages, schema_fuzz
from gateway.devtools.chaos.bookkeeping import Context
from gateway.devtools.chaos.report import ScenarioResult

Scenario = Callable[[Context], ScenarioResult]

SCENARIOS: dict[str, Scenario] = {
    "schemathesis": schema_fuzz.run,
    "hostile": hostile.run,
    "upstream-faults": outages.upstream_faults,
    "db-cut": outages.db_cut,
    "replica-kill": outages.replica_kill,
    "replica-kill-db-down": lambda ctx: outages.replica_kill(ctx, during_outage=True),
    "redeploy": deploys.redeploy,
    "redeploy-db-down": deploys.redeploy_db_down,
    "spool-disk-full": deploys.disk_full,
    "down": deploys.down,
}


class UnknownScenario(ValueError):
    pass


def select(names: Sequence[str] | None) -> list[str]:
    """The scenarios asked for, in the run's order; None or empty: all of them."""
    if not names:
        return list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise UnknownScenario(f"unknown scenario {', '.join(unknown)} "
                              f"(known: {', '.join(SCENARIOS)})")
    return [n for n in SCENARIOS if n in names]


def restore(ctx: Context, replicas: int) -> str | None:
    """Put the stack back as the next scenario expects it; a note when it had to act."""
    stack = ctx.stack
    if stack.proxy is not None and stack.proxy.blocked:
        stack.proxy.unblock()
    if stack.sim is not None:
        stack.sim.clear_faults()
    if not stack.ready():
        stack.up()
        ctx.warm_keys()
        return "gateway brought back up with `costgate up`"
    stack.wait_replicas(replicas)
    return None


def run_suite(ctx: Context, names: Sequence[str],
              on_result: Callable[[ScenarioResult], None] | None = None) -> list[ScenarioResult]:
    for name in names:
        ctx.key(name)  # every key made, and known to every replica, before anything breaks
    ctx.warm_keys()
    replicas = len(ctx.stack.replica_pids()) or 2
    results = []
    for i, name in enumerate(names):
        ctx.log(f"-- {name}")
        started = time.monotonic()
        try:
            result = SCENARIOS[name](ctx)
        except Exception as err:  # noqa: BLE001 - one broken scenario must not hide the rest
            result = ScenarioResult(name, seconds=time.monotonic() - started,
                                    error=f"{type(err).__name__}: {err}")
            ctx.log(traceback.format_exc())
        broken = False
        if i < len(names) - 1:
            try:
                note = restore(ctx, replicas)
            except Exception as err:  # noqa: BLE001 - the next scenarios would only fail
                note, broken = f"the stack could not be restored, run stopped: {err}", True
            if note:
                result.notes.append(note)
        results.append(result)
        if on_result is not None:
            on_result(result)
        if broken:
            break
    return results
