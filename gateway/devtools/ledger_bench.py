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

from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource


def _records(n: int) -> list[UsageRecord]:
    t0 = dt.datetime.now(dt.UTC)
    apps = ("checkout", "search", "support", "reports")
    models = (("deepseek-v3.2", "deepseek"), ("gemini-2.5-flash", "google"), ("gpt-4.1", "openai"))
    out = []
    for i in range(n):
        model, provider = models[i % 3]
        out.append(
            UsageRecord(
                request_id=uuid.uuid4(),
                started_at=t0 + dt.timedelta(milliseconds=i),
                ended_at=t0 + dt.timedelta(milliseconds=i + 800),
                app=apps[i % 4],
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
                latency_ms=800,
                ttft_ms=150,
                upstream_latency_ms=790,
                attempts=1,
                fallback_path=(model,),
                routing_policy="weighted",
                price_version_id=uuid.uuid4(),
                billing_currency="USD",
                actual_cost=Decimal("0.0003640000"),
                actual_cost_usd=Decimal("0.0003640000"),
                list_cost_usd=Decimal("0.0003640000"),
                baseline_model="gpt-4.1",
                baseline_cost_usd=Decimal("0.0036000000"),
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
    url: str, rows: int, batch_size: int, max_buffer: int, max_seconds: float
) -> dict[str, Any]:
    from gateway.ledger.writer import SPILL_FRACTION, RecordWriter

    records = _records(rows)
    # the pre-built records are the bench's, not the writer's: keep them out of the
    # garbage collector's full passes, which would otherwise show up as loop stalls
    gc.collect()
    gc.freeze()
    with tempfile.TemporaryDirectory(prefix="costgate-bench-spool-") as spool:
        writer = RecordWriter(
            url, spool_dir=Path(spool), batch_size=batch_size, max_buffer=max_buffer
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
            for r in records[i : i + max(0, min(room, 1000))]:
                writer.submit(r)
                i += 1
            await asyncio.sleep(0.001 if i < rows else 0.01)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        stop.set()
        await ticker
        await writer.close(timeout_s=30)
        stats = writer.stats()
    return {
        "rows": stats["written"],
        "seconds": round(elapsed, 3),
        "rows_per_s": round(stats["written"] / elapsed),
        "batch_size": batch_size,
        "client_cpu_us_per_row": round(cpu / max(1, stats["written"]) * 1e6, 1),
        "max_loop_stall_ms": round(worst[0] * 1000, 1),
        "control_1ms_slices_max_stall_ms": round(control[0] * 1000, 1),
        "spooled": stats["spooled"],
        "dropped": stats["dropped"],
        "complete": stats["written"] == rows,
    }


def bench(args: argparse.Namespace) -> int:
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
        result = asyncio.run(
            run_bench(url, args.rows, args.batch_size, args.max_buffer, args.max_seconds)
        )
    finally:
        with psycopg.connect(libpq_url(server), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(json.dumps(result))
    return 0 if result["complete"] else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--max-buffer", type=int, default=20_000)
    p.add_argument("--max-seconds", type=float, default=120.0, help="give up after this long")
    p.add_argument("--database-url", default=None, help="server to use (default: the ledger's)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gateway.devtools.ledger_bench")
    add_arguments(p)
    return bench(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
