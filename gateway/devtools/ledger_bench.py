"""How many usage rows per second the record writer sustains into PostgreSQL.

    python -m gateway.devtools.ledger_bench [--rows 200000] [--batch-size 500]
    costgate ledger-bench ...   (the same)

It creates a scratch database on the ledger's server (DATABASE_URL, or the embedded one),
migrates it, submits pre-built records as fast as the writer drains them (the producer
keeps the buffer below its bound, so nothing spools), waits until every row is committed,
then drops the scratch database. It also reports the longest event-loop stall seen by a
10 ms ticker while the writer works (what a request sharing the loop would have waited),
beside the same figure for a control task that yields every 1 ms of CPU (what a busy
machine adds by itself), and the client process's CPU time per row.
Bounded by --rows and --max-seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import tempfile
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

# only this import from the project at the top: an older tree's bench loads this file by
# path to write the very same rows (`--compare-tree`)
from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource

# The rows: `realistic`: 4 apps × 3 models × 3 price versions (12 usage groups a batch),
# latencies spread over two decades (so the histograms hold many bins), end users drawn
# from 500, a `feature` tag from 20 values, sessions of ten requests, each session one
# end user's in one app (until issue 29's second pass, the ten requests of a "session"
# had ten end users and four apps: ten session rollup groups). `worst`: every row
# a group of its own in every rollup it reaches: a new price version, end user and
# session per row (and the same spread latencies).
MODES = ("realistic", "worst")
_APPS = ("checkout", "search", "support", "reports")
_MODELS = (("deepseek-v3.2", "deepseek"), ("gemini-2.5-flash", "google"), ("gpt-4.1", "openai"))
_PRICE_VERSIONS = tuple(uuid.UUID(int=i + 1) for i in range(3))
_SUBMITS_PER_TURN = 100


def bench_records(n: int, mode: str = "realistic") -> list[UsageRecord]:
    if mode not in MODES:
        raise ValueError(f"mode: one of {MODES}")
    worst = mode == "worst"
    t0 = dt.datetime.now(dt.UTC)
    out = []
    for i in range(n):
        model, provider = _MODELS[i % 3]
        # 80 ms to 8 s, a deterministic spread over about 230 bins
        latency = int(80 * 100 ** (((i * 7919) % 1000) / 1000))
        out.append(
            UsageRecord(
                request_id=uuid.uuid4(),
                started_at=t0 + dt.timedelta(milliseconds=i),
                ended_at=t0 + dt.timedelta(milliseconds=i + latency),
                app=_APPS[(i // 10) % 4],
                team="bench",
                key_id=None,
                requested_model="auto",
                alias="auto",
                model=model,
                provider=provider,
                stream=bool(i % 2),
                status=RequestStatus.OK,
                http_status=200,
                error_class=None,
                prompt_tokens=1000 + i % 500,
                cached_prompt_tokens=0,
                completion_tokens=200 + i % 100,
                reasoning_tokens=0,
                usage_source=UsageSource.PROVIDER,
                latency_ms=latency,
                ttft_ms=latency // 5 if i % 2 else None,
                upstream_latency_ms=latency - 10,
                attempts=1,
                fallback_path=(model,),
                routing_policy="weighted",
                price_version_id=uuid.uuid4() if worst else _PRICE_VERSIONS[(i // 4) % 3],
                billing_currency="USD",
                actual_cost=Decimal("0.0003640000"),
                actual_cost_usd=Decimal("0.0003640000"),
                list_cost_usd=Decimal("0.0003640000"),
                baseline_model="gpt-4.1",
                baseline_cost_usd=Decimal("0.0036000000"),
                end_user=f"user-{i}" if worst else f"user-{(i // 10 * 31) % 500}",
                session_id=f"session-{i}" if worst else f"session-{i // 10}",
                tags={"feature": f"feature-{i % 20}"},
            )
        )
    return out


async def _ticker(stop: asyncio.Event, worst: list[float]) -> None:
    period = 0.01
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(period)
        worst[0] = max(worst[0], time.perf_counter() - t - period)


async def _busy_1ms_slices(stop: asyncio.Event) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        while time.perf_counter() - t < 0.001:
            pass
        await asyncio.sleep(0)


async def run_bench(
    url: str,
    rows: int,
    batch_size: int,
    max_buffer: int,
    max_seconds: float,
    mode: str = "realistic",
    connections: int = 2,
) -> dict[str, Any]:
    from gateway.ledger.writer import SPILL_FRACTION, RecordWriter

    records = bench_records(rows, mode)
    # the pre-built records are the bench's, not the writer's: keep them out of the
    # garbage collector's full passes, which would otherwise show up as loop stalls
    gc.collect()
    gc.freeze()
    with tempfile.TemporaryDirectory(prefix="costgate-bench-spool-") as spool:
        writer = RecordWriter(
            url,
            spool_dir=Path(spool),
            batch_size=batch_size,
            max_buffer=max_buffer,
            connections=connections,
        )
        await writer.start()
        # the control: stalls seen beside a task that yields every 1 ms of CPU, which is
        # what a busy machine adds by itself (the writer yields about as often)
        stop, control = asyncio.Event(), [0.0]
        ticker = asyncio.create_task(_ticker(stop, control))
        busy = asyncio.create_task(_busy_1ms_slices(stop))
        await asyncio.sleep(2.0)
        stop.set()
        await asyncio.gather(ticker, busy)
        stop, worst = asyncio.Event(), [0.0]
        ticker = asyncio.create_task(_ticker(stop, worst))
        t0, cpu0 = time.perf_counter(), time.process_time()
        deadline = t0 + max_seconds
        i = 0
        while writer.stats()["written"] < rows and time.perf_counter() < deadline:
            # below the mark where the writer spills to disk even with the database up
            room = int(max_buffer * SPILL_FRACTION) - batch_size - writer.stats()["buffer_depth"]
            # a hundred rows at a time (about 1 ms), as requests would come: a longer run of
            # submits would be the bench's own loop stall, not the writer's
            n = max(0, min(room, _SUBMITS_PER_TURN, rows - i))
            for r in records[i : i + n]:
                writer.submit(r)
            i += n
            await asyncio.sleep(0 if n else 0.001 if i < rows else 0.01)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        stop.set()
        await ticker
        await writer.close(timeout_s=30)
        stats = writer.stats()
    close_s, closed = await asyncio.to_thread(_close_days, url)
    return {
        "mode": mode,
        "rows": stats["written"],
        "seconds": round(elapsed, 3),
        "rows_per_s": round(stats["written"] / elapsed),
        "batch_size": batch_size,
        "connections": connections,
        "client_cpu_us_per_row": round(cpu / max(1, stats["written"]) * 1e6, 1),
        "max_loop_stall_ms": round(worst[0] * 1000, 1),
        "control_1ms_slices_max_stall_ms": round(control[0] * 1000, 1),
        "spooled": stats["spooled"],
        "dropped": stats["dropped"],
        "complete": stats["written"] == rows,
        # the end users by kind of the bench's day, summed when the day closes (once a
        # day, off the writer's batches: attribution_sql.KINDS_CLOSED_BEFORE)
        "day_close_s": round(close_s, 3),
        "day_close_rows": closed,
        "rows_per_s_with_day_close": round(stats["written"] / (elapsed + close_s)),
    }


def _close_days(url: str) -> tuple[float, int]:
    """The day close of every day the bench wrote (all of them: the scratch database is
    dropped afterwards), timed."""
    import psycopg

    from db.analytics.attribution_sql import CLOSE_KINDS_FUNCTION
    from db.engine import libpq_url

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        t0 = time.perf_counter()
        row = conn.execute(f"SELECT {CLOSE_KINDS_FUNCTION}('infinity')").fetchone()
        return time.perf_counter() - t0, int(row[0]) if row else 0


def bench(args: argparse.Namespace) -> int:
    if args.compare_tree:
        return compare(args)
    modes = MODES if args.mode == "both" else (args.mode,)
    ok = True
    for mode in modes:
        result = bench_one(args, mode)
        print(json.dumps(result), flush=True)
        ok = ok and result["complete"]
    return 0 if ok else 1


def bench_one(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    import psycopg
    from sqlalchemy import make_url

    from db.engine import database_url, libpq_url
    from db.migrate import upgrade

    server = args.database_url or database_url()
    name = f"costgate_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(libpq_url(server), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url)
        return asyncio.run(
            run_bench(
                url,
                args.rows,
                args.batch_size,
                args.max_buffer,
                args.max_seconds,
                mode,
                args.connections,
            )
        )
    finally:
        with psycopg.connect(libpq_url(server), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# run in an older tree (its writer, migrations and bench loop) with this tree's rows: its
# record builder is replaced by ours (`_records` in a bench that predates the modes,
# `bench_records` since), and a bench with modes is told which one to run (its default
# runs both, and only the last line is read)
_OLD_TREE_SCRIPT = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("new_ledger_bench", sys.argv[1])
rows = importlib.util.module_from_spec(spec); spec.loader.exec_module(rows)
import gateway.devtools.ledger_bench as b
b._records = lambda n: rows.bench_records(n, sys.argv[2])
b.bench_records = lambda n, mode=None: rows.bench_records(n, sys.argv[2])
modes = [f"--mode={sys.argv[2]}"] if hasattr(b, "MODES") else []
raise SystemExit(b.main([*sys.argv[3:], *modes]))
"""


def _run_side(tree: Path, mode: str, args: argparse.Namespace, old: bool) -> dict[str, Any]:
    import os
    import subprocess
    import sys

    common = [
        f"--rows={args.rows}",
        f"--batch-size={args.batch_size}",
        f"--max-buffer={args.max_buffer}",
        f"--max-seconds={args.max_seconds}",
    ]
    if args.database_url:
        common.append(f"--database-url={args.database_url}")
    if old:
        cmd = [sys.executable, "-c", _OLD_TREE_SCRIPT, __file__, mode, *common]
    else:
        cmd = [
            sys.executable,
            "-m",
            "gateway.devtools.ledger_bench",
            f"--mode={mode}",
            f"--connections={args.connections}",
            *common,
        ]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"bench in {tree} failed: {done.stderr[-2000:]}")
    return {"tree": str(tree), **json.loads(lines[-1])}


def compare(args: argparse.Namespace) -> int:
    """Old tree and this one, each mode, alternating in one run (ratios: a shared machine
    is noisy, so only figures taken side by side compare)."""
    here = Path(__file__).resolve().parents[2]
    modes = MODES if args.mode == "both" else (args.mode,)
    ok = True
    for mode in modes:
        old = _run_side(Path(args.compare_tree), mode, args, old=True)
        new = _run_side(here, mode, args, old=False)
        for side, r in (("old", old), ("new", new)):
            print(json.dumps({"side": side, "mode": mode, **r}), flush=True)
        ratio = new["rows_per_s"] / max(1, old["rows_per_s"])
        print(json.dumps({"mode": mode, "new_over_old": round(ratio, 2)}), flush=True)
        ok = ok and new["complete"]
    return 0 if ok else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--max-buffer", type=int, default=20_000)
    p.add_argument("--max-seconds", type=float, default=120.0, help="give up after this long")
    p.add_argument("--database-url", default=None, help="server to use (default: the ledger's)")
    p.add_argument("--connections", type=int, default=2,
                   help="the writer's connections (batches written side by side)")  # fmt: skip
    p.add_argument("--mode", choices=(*MODES, "both"), default="both",
                   help="realistic batches, every row its own group, or both")  # fmt: skip
    p.add_argument("--compare-tree", default=None,
                   help="an older checkout: its writer beside this one's")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gateway.devtools.ledger_bench")
    add_arguments(p)
    return bench(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
