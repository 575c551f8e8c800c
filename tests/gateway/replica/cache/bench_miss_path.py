"""CPU per request of the cache's miss path, without the rest of the gateway (not a test).

    .venv/bin/python -m tests.gateway.replica.cache.bench_miss_path [--requests N]
        [--concurrency C] [--backends lru,redis,postgres]

The end-to-end bench (`bench_cache`) measures throughput through Serve, which on a shared
2-core machine moves by more than the cache costs. This one drives `ResponseCache` as
`GatewayService` does (the lookup, the answer's JSON rendered, the store handed over) for
N requests with C in flight, every prompt new, and counts CPU: this process's and, for
Redis (its own, on a free port), the server's (INFO cpu), and for the shared PostgreSQL
store (a scratch database on `COSTGATE_BENCH_PG`) its server processes' (/proc), per
request. `off` is the same work with the cache off: the difference is what a miss costs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

import psycopg
from fastapi.responses import JSONResponse

from db.engine import libpq_url
from gateway.domain.config import load_config
from gateway.domain.endpoints import Endpoint
from gateway.domain.pricing import PriceCatalog, TokenUsage
from gateway.domain.usage_record import UsageSource
from gateway.replica.auth import Caller
from gateway.replica.cache.backends import MemoryLRU
from gateway.replica.cache.gate import ResponseCache
from gateway.replica.cache.postgres_store import PostgresStore, TieredStore
from gateway.replica.chat_request import ChatRequest
from gateway.replica.exchange import AttemptHooks, Exchange, RecordSink, utcnow
from gateway.replica.usage_accounting import Accounted
from tests.fixtures.database import scratch_database
from tests.fixtures.ports import claim_block
from tests.fixtures.sim import EXAMPLE_CONFIG
from tests.gateway.replica.cache.conftest import REDIS_PORT, RedisProcess

MODEL = "gpt-4o-mini"
REPLY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "word " * 40},
                      "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 20, "completion_tokens": 40, "total_tokens": 60}}
USED = Accounted(TokenUsage(prompt_tokens=20, completion_tokens=40), UsageSource.PROVIDER)


SERVER = os.environ.get("COSTGATE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


class Server(Protocol):
    def cpu_s(self) -> float: ...


class PostgresServer:
    """The CPU of the server processes serving the cache's connections to one database."""

    def __init__(self, url: str) -> None:
        self.url = url

    def cpu_s(self) -> float:
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            pids = [r[0] for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name LIKE 'costgate-cache%'")]
        tick, total = os.sysconf("SC_CLK_TCK"), 0.0
        for pid in pids:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        return total


async def run(backend: str, server: Any, state: str, n: int, concurrency: int) -> str:
    cfg = load_config(EXAMPLE_CONFIG)
    redis = server if backend == "redis" else None
    opts = cfg.cache.model_copy(update={"redis_url": redis.url if redis else None,
                                        "redis_timeout_s": 0.5})
    cfg = cfg.model_copy(update={"cache": opts})
    cache = ResponseCache(cfg, PriceCatalog.from_config(cfg), RecordSink(), AttemptHooks(),
                          lambda ex: {})
    if backend == "postgres":
        shared = PostgresStore(server.url, 0.5)
        if hasattr(shared, "listen"):  # an older commit's store has no key index
            shared.listen()
        cache.backend = TieredStore(MemoryLRU(opts.max_bytes), shared)
    headers = {"x-costgate-cache": state, "authorization": "Bearer x"}
    caller, model = Caller(app="bench", team=None, key_id=None), cfg.models_by_name[MODEL]

    async def one(i: int) -> None:
        prompt = f"Write a short poem about the sea (#{time.time_ns()}-{i})"
        body = {"model": MODEL, "max_tokens": 64,
                "messages": [{"role": "user", "content": prompt}]}
        ex = Exchange(uuid.uuid4(), time.perf_counter(), utcnow(), caller, MODEL)
        ex.endpoint = Endpoint.CHAT_COMPLETIONS
        ex.request = ChatRequest(body=body, model=MODEL, stream=False, include_usage=False,
                                 max_tokens=64)
        ticket = await cache.lookup(ex, headers)
        assert ticket.response is None, "every prompt is new"
        ex.model = model
        reply = dict(REPLY)
        response = JSONResponse(reply)
        ticket.store_body(reply, response.body, USED)
        ticket.tag(response)

    for i in range(200):  # connections open, code warm
        await one(-i)
    await cache.flush()
    before = server.cpu_s() if server else 0.0
    queue = iter(range(n))
    started, cpu = time.perf_counter(), time.process_time()

    async def worker() -> None:
        for i in queue:
            await one(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await cache.flush()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    server_s = (server.cpu_s() - before) if server else 0.0
    stats = cache.stats()
    await cache.aclose()
    return (f"{backend:8s} {state:3s} c={concurrency:<3d} gateway CPU {cpu / n * 1e6:6.1f} "
            f"us/req, server CPU {server_s / n * 1e6:5.1f} us/req, wall "
            f"{wall / n * 1e6:6.1f} us/req, stored {stats.get('stored', 0)}, "
            f"answered by the index {stats.get('absent', 0)}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--backends", default="lru,redis,postgres")
    args = parser.parse_args()
    block = claim_block(offsets=(REDIS_PORT,))
    redis = RedisProcess(block.port(REDIS_PORT), Path(tempfile.mkdtemp(prefix="cache-miss-")))
    try:
        with scratch_database(SERVER, "costgate_miss_bench") as url:
            servers = {"lru": None, "redis": redis, "postgres": PostgresServer(url)}
            for backend in args.backends.split(","):
                for state in ("off", "on", "off", "on"):  # interleaved: the machine is shared
                    print(asyncio.run(run(backend, servers[backend], state, args.requests,
                                          args.concurrency)), flush=True)
    finally:
        redis.stop()
        block.release()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
