"""The shared store's round trips, alone (not a test: run it by hand).

    .venv/bin/python -m tests.gateway.replica.cache.bench_store

On a scratch database (migrated, dropped at the end) of the server in COSTGATE_BENCH_PG,
one connection as a replica holds it, the SQL of `db/shared_state/response_cache.py`: 2,000 lookups
that miss, that hit a 2 KB entry, a batch of 64 keys, and 2,000 stores; p50 and p90.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from typing import Any

import psycopg

from db.engine import libpq_url
from db.shared_state.response_cache import LOOKUP_SQL, STORE_SQL
from tests.fixtures.database import scratch_database

SERVER = os.environ.get("COSTGATE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
N = 2000


async def _timed(conn: Any, sql: str, params: tuple[Any, ...]) -> list[float]:
    out = []
    for _ in range(N):
        t = time.perf_counter()
        cur = await conn.execute(sql, params, prepare=True)
        if cur.description:
            await cur.fetchall()
        out.append(time.perf_counter() - t)
    return out


async def main(url: str) -> None:
    conn = await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True)
    await conn.execute(STORE_SQL, (["k1"], [b"x" * 2000], [3600.0]))
    runs = {
        "lookup, miss": (LOOKUP_SQL, (["nokey"],)),
        "lookup, hit 2 KB": (LOOKUP_SQL, (["k1"],)),
        "lookup, 64 keys": (LOOKUP_SQL, ([f"n{i}" for i in range(64)],)),
        "store, 2 KB": (STORE_SQL, (["k2"], [b"y" * 2000], [3600.0])),
    }
    for label, (sql, params) in runs.items():
        ts = sorted(await _timed(conn, sql, params))
        print(f"{label:18} p50 {statistics.median(ts) * 1e6:6.0f} µs"
              f"  p90 {ts[int(N * 0.9)] * 1e6:6.0f} µs")
    await conn.close()


if __name__ == "__main__":
    with scratch_database(SERVER, "costgate_store_bench") as scratch:
        asyncio.run(main(scratch))
