"""CPU per request of the cache's miss path, without the rest of the gateway (not a test).

    .venv/bin/python -m tests.gateway.replica.cache.bench_miss_path [--requests N]
        [--concurrency C]

The end-to-end bench (`bench_cache`) measures throughput through Serve, which on a shared
2-core machine moves by more than the cache costs. This one drives `ResponseCache` as
`GatewayService` does (the lookup, the answer's JSON rendered, the store handed over) for
N requests with C in flight, every prompt new, and counts CPU: this process's and, for
Redis (its own, on a free port), the server's (INFO cpu), per request. `off` is the same
work with the cache off: the difference is what a miss costs.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from fastapi.responses import JSONResponse

from gateway.domain.config import load_config
from gateway.domain.endpoints import Endpoint
from gateway.domain.pricing import PriceCatalog, TokenUsage
from gateway.domain.usage_record import UsageSource
from gateway.replica.auth import Caller
from gateway.replica.cache.gate import ResponseCache
from gateway.replica.chat_request import ChatRequest
from gateway.replica.exchange import AttemptHooks, Exchange, RecordSink, utcnow
from gateway.replica.usage_accounting import Accounted
from tests.fixtures.ports import claim_block
from tests.fixtures.sim import EXAMPLE_CONFIG
from tests.gateway.replica.cache.conftest import REDIS_PORT, RedisProcess

MODEL = "gpt-4o-mini"
REPLY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "word " * 40},
                      "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 20, "completion_tokens": 40, "total_tokens": 60}}
USED = Accounted(TokenUsage(prompt_tokens=20, completion_tokens=40), UsageSource.PROVIDER)


async def run(redis: RedisProcess | None, state: str, n: int, concurrency: int) -> str:
    cfg = load_config(EXAMPLE_CONFIG)
    opts = cfg.cache.model_copy(update={"redis_url": redis.url if redis else None,
                                        "redis_timeout_s": 0.5})
    cfg = cfg.model_copy(update={"cache": opts})
    cache = ResponseCache(cfg, PriceCatalog.from_config(cfg), RecordSink(), AttemptHooks(),
                          lambda ex: {})
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
    before = redis.cpu_s() if redis else 0.0
    queue = iter(range(n))
    started, cpu = time.perf_counter(), time.process_time()

    async def worker() -> None:
        for i in queue:
            await one(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await cache.flush()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    server = (redis.cpu_s() - before) if redis else 0.0
    stats = cache.stats()
    await cache.aclose()
    backend = "redis" if redis else "lru"
    return (f"{backend:5s} {state:3s} c={concurrency:<3d} gateway CPU {cpu / n * 1e6:6.1f} "
            f"us/req, Redis CPU {server / n * 1e6:5.1f} us/req, wall {wall / n * 1e6:6.1f} "
            f"us/req, stored {stats.get('stored', 0)}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    block = claim_block(offsets=(REDIS_PORT,))
    redis = RedisProcess(block.port(REDIS_PORT), Path(tempfile.mkdtemp(prefix="cache-miss-")))
    try:
        for backend in (None, redis):
            for state in ("off", "on", "off", "on"):  # interleaved: the machine is shared
                print(asyncio.run(run(backend, state, args.requests, args.concurrency)))
    finally:
        redis.stop()
        block.release()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
