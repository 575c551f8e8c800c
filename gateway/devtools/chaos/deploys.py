"""Scenarios 5, 6 and 8: `costgate down` under load, redeploys under load (a changed
setting, a live routing change), and a full spool disk while PostgreSQL is away.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from pathlib import Path

from gateway.devtools.chaos.bookkeeping import Context, expect, expect_intact, finish, utcnow
from gateway.devtools.chaos.report import ScenarioResult
from gateway.devtools.chaos.spool_disk import SpoolDisk
from gateway.devtools.chaos.stack import ChaosStack
from gateway.ledger.spool import JOURNAL_DIR

# the spool's tmpfs is this much bigger than the free space the scenario leaves on it:
# room for the replicas' files before the filler takes it
FILLER_KIB = 4096


def down(ctx: Context) -> ScenarioResult:
    """`down` while requests flow: replicas drain and flush, the rest find a closed port."""
    name = "down"
    started, since = time.monotonic(), utcnow()
    run = ctx.load(name, duration_s=ctx.sizes.load_s)
    time.sleep(ctx.sizes.load_s / 3)
    t0 = time.monotonic()
    done = ctx.stack.down()
    took = time.monotonic() - t0
    outcomes = run.join()
    result, acc = finish(ctx, name, outcomes, since, started)
    result.notes.insert(0, f"`costgate down` at {ctx.sizes.load_s / 3:.0f} s of load took "
                           f"{took:.1f} s (exit {done.returncode}): "
                           f"{done.stdout.strip().splitlines()[-1:] or done.stderr[-200:]}")
    expect(result, done.returncode == 0, f"`costgate down` exited {done.returncode}")
    if acc.lost:
        waiting = spooled_ids(ctx.stack.state_dir / "spool")
        kept = sum(1 for rid in acc.lost if rid in waiting)
        result.notes.append(f"{kept} of the {acc.lost_count} lost rows wait in spool or "
                            f"journal files left behind ({len(waiting)} rows there): the next "
                            "`up` on this state dir would replay those; the rest are gone")
    expect_intact(result, acc)
    return result


def spooled_ids(spool_dir: Path) -> set[str]:
    """Request ids in the spool and journal files of a directory (lines that do not parse
    skipped): both are replayed by the next writer on that directory."""
    found = set()
    paths = [*spool_dir.glob("usage-*.jsonl"), *(spool_dir / JOURNAL_DIR).glob("usage-*.jsonl")]
    for path in paths:
        for line in path.read_bytes().splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                found.add(str(json.loads(line)["request_id"]))
    return found


def _next_config(ctx: Context, max_body_delta: int) -> dict[str, object]:
    cfg = copy.deepcopy(ctx.stack.config)
    cfg["gateway"]["max_body_bytes"] += max_body_delta
    return cfg


def redeploy(ctx: Context) -> ScenarioResult:
    """Three changes under one load: the same file edited and `up` again, the change in a
    new file and `up` (Serve sees new args and replaces the replicas), a routing change."""
    name = "redeploy"
    stack = ctx.stack
    started, since = time.monotonic(), utcnow()
    before = stack.replica_pids()
    run = ctx.load(name, duration_s=ctx.sizes.load_s * 3, model="fast")
    time.sleep(ctx.sizes.load_s / 2)
    notes = []

    def at() -> str:
        return f"+{time.time() - since.timestamp():.1f} s"

    stack.write_config(_next_config(ctx, 1024), stack.config_path)
    notes.append(f"{at()}: same file edited, `costgate up`")
    stack.up()
    same_file = stack.wait_replicas(len(before), exclude=frozenset(before), timeout_s=180)
    notes.append(f"{at()}: `up` after editing the same file (max_body_bytes +1 KiB): "
                 f"replicas {before} -> {same_file}")  # fmt: skip

    n = len(list(stack.workdir.glob("costgate-*.yaml"))) + 1
    stack.write_config(_next_config(ctx, 2048), stack.workdir / f"costgate-{n}.yaml")
    t0 = time.monotonic()
    notes.append(f"{at()}: `costgate up` with the change in a new file")
    stack.up()
    replaced = stack.wait_replicas(len(before), exclude=frozenset(same_file), timeout_s=180)
    notes.append(f"{at()}: replicas {same_file} -> {replaced}, "
                 f"{time.monotonic() - t0:.1f} s after that `up` started")

    routing = stack.cli("routing", "set", "fast", "gemini-2.5-flash=50", "gpt-4o-mini=50",
                        "--note", "chaos redeploy", "--config", str(stack.config_path),
                        timeout_s=120)  # fmt: skip
    last = (routing.stdout.strip().splitlines() or [routing.stderr.strip()[-300:]])[-1]
    notes.append(f"`routing set fast` exit {routing.returncode}: {last}")
    outcomes = run.join()
    result, acc = finish(ctx, name, outcomes, since, started)
    result.notes[:0] = notes
    expect(result, routing.returncode == 0, f"`costgate routing set` exited {routing.returncode}")
    expect(result, acc.answered_5xx == 0, f"{acc.answered_5xx} answers were 5xx")
    # every key was known to every replica before the load, and PostgreSQL stayed up
    refused = [o for o in outcomes if o.status == 401]
    expect(result, not refused, f"{len(refused)} requests with a valid key were refused 401"
           + (f", from +{refused[0].started - since.timestamp():.1f} s to "
              f"+{refused[-1].started - since.timestamp():.1f} s: {refused[0].error}"
              if refused else ""))  # fmt: skip
    expect_intact(result, acc)
    return result


def redeploy_db_down(ctx: Context) -> ScenarioResult:
    """`costgate up` with a changed file while PostgreSQL is away, under load: `up` skips
    what needs the database and redeploys; the closing replicas spool what they hold,
    the new ones replay it once the database is back."""
    name = "redeploy-db-down"
    stack, proxy = ctx.stack, ctx.stack.proxy
    assert proxy is not None
    started, since = time.monotonic(), utcnow()
    before = stack.replica_pids()
    run = ctx.load(name, duration_s=ctx.sizes.load_s * 3)
    time.sleep(ctx.sizes.load_s / 2)
    proxy.block()
    try:
        n = len(list(stack.workdir.glob("costgate-*.yaml"))) + 1
        stack.write_config(_next_config(ctx, 4096), stack.workdir / f"costgate-{n}.yaml")
        stack.config_path = stack.workdir / f"costgate-{n}.yaml"
        t0 = time.monotonic()
        up = stack.cli("up", "--timeout", "240", timeout_s=300)
        took = time.monotonic() - t0
        replaced = stack.wait_replicas(len(before), exclude=frozenset(before), timeout_s=180)
    finally:
        proxy.unblock()
    outcomes = run.join()
    result, acc = finish(ctx, name, outcomes, since, started)
    warning = next((line for line in up.stderr.splitlines() if "unreachable" in line), "")
    result.notes.insert(0, f"`costgate up` with PostgreSQL cut: exit {up.returncode} in "
                           f"{took:.1f} s, replicas {before} -> {replaced}; it said: "
                           f"{warning[:160] or up.stderr[-200:]}")  # fmt: skip
    expect(result, up.returncode == 0, f"`costgate up` exited {up.returncode}")
    expect(result, acc.answered_5xx == 0, f"{acc.answered_5xx} answers were 5xx")
    expect_intact(result, acc)
    return result


def disk_full(ctx: Context) -> ScenarioResult:
    """The spool is where rows go when PostgreSQL is away; here its disk is full.

    A disk fills up under running replicas: a tmpfs is mounted on the spool directory,
    the replicas are replaced by ones that open their spool on it, and a filler file
    then takes all of it but `spool_disk_kib`. PostgreSQL goes away under load, the
    rows find the disk full and wait in memory; a redeploy then closes every replica
    while both are away. Each must keep its rows until one of them takes them back:
    PostgreSQL comes back only once the new replicas run.
    """
    name = "spool-disk-full"
    stack, proxy = ctx.stack, ctx.stack.proxy
    assert proxy is not None
    started, since = time.monotonic(), utcnow()
    disk = SpoolDisk(stack.state_dir / "spool", ctx.sizes.spool_disk_kib + FILLER_KIB).mount()
    before_stats = stack.writer_stats()
    try:
        before = stack.replica_pids()
        _redeploy_same(stack)
        on_disk = stack.wait_replicas(len(before), exclude=frozenset(before), timeout_s=180)
        disk.fill(leave_kib=ctx.sizes.spool_disk_kib)
        run = ctx.load(name, duration_s=ctx.sizes.load_s)
        time.sleep(ctx.sizes.load_s / 4)
        proxy.block()
        outcomes = run.join()
        # `costgate up` cannot run now (it migrates and syncs prices first): Serve's API
        # directly. New args: every replica closes with rows it can put nowhere yet
        _redeploy_same(stack)
        on_tmpfs = stack.wait_replicas(len(before), exclude=frozenset(on_disk), timeout_s=180)
        used, total = disk.usage()
        files = disk.files()
        proxy.unblock()
        result, acc = finish(ctx, name, outcomes, since, started)
        after_stats = stack.writer_stats()
    finally:
        proxy.unblock()
        disk.unmount()
    result.notes.insert(0, f"spool on a {total // 1024} KiB tmpfs filled to leave "
                           f"{ctx.sizes.spool_disk_kib} KiB, {used // 1024} KiB used after "
                           f"the redeploy (spool files: {', '.join(files) or 'none'})")
    dropped = after_stats.get("dropped_rows", 0) - before_stats.get("dropped_rows", 0)
    result.notes.append(f"dropped rows counted by the writers (/metrics, live replicas): "
                        f"{dropped:.0f}")
    expect(result, acc.answered_5xx == 0, f"{acc.answered_5xx} answers were 5xx")
    expect(result, acc.duplicated == 0, f"{acc.duplicated} duplicated rows")
    expect(result, acc.lost_count == 0 and dropped == 0,
           f"{acc.lost_count} answered requests lost their rows ({dropped:.0f} counted as "
           "dropped by the writers)")
    # back on the real disk. The replicas on the tmpfs (both generations) keep it (the
    # unmount was lazy), full, their journal stopped: one answering the next scenario would
    # hold its rows in memory only. They hold none now (every answered row is in the
    # ledger, counted above, and no load runs), so they are stopped at once rather than
    # sitting out Serve's 30 s drain
    _redeploy_same(stack)
    stack.wait_replicas(len(before), exclude=frozenset(on_disk) | frozenset(on_tmpfs),
                        timeout_s=180)  # fmt: skip
    took = stack.kill_replicas(on_disk + on_tmpfs)
    result.notes.append(f"the replicas on the tmpfs were stopped ({took:.1f} s) once the "
                        "redeploy to the real disk ran")
    return result


def _redeploy_same(stack: ChaosStack) -> None:
    """The same settings from a new file: Serve sees new args and replaces every replica."""
    n = len(list(stack.workdir.glob("costgate-*.yaml"))) + 1
    stack.redeploy_via_serve(
        stack.write_config(copy.deepcopy(stack.config), stack.workdir / f"costgate-{n}.yaml")
    )
