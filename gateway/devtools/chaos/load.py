"""Bounded, paced traffic for a scenario: every request carries an id of ours, and what
the client saw (status, the gateway's request id, or no answer at all) is kept.

Open loop at `rps`, capped at `concurrency` requests in flight (past that it waits, so a
stalled gateway slows the load instead of piling up sockets), stopped by whichever comes
first of `requests`, `duration_s` or `stop()`. It runs on an event loop of its own in a
thread, so that a scenario can cut the database or kill a replica meanwhile.
aiohttp, as in `costgate bench`: the client shares 2 cores with what it loads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import aiohttp

REQUEST_ID_HEADER = "x-costgate-request-id"
CLIENT_ID_HEADER = "x-chaos-id"


@dataclasses.dataclass(frozen=True)
class LoadSpec:
    requests: int
    duration_s: float
    rps: float
    concurrency: int = 32
    model: str = "gpt-4o-mini"
    stream_every: int = 4  # every 4th request streams; 0: none
    timeout_s: float = 30.0
    max_tokens: int = 16


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One request as its client saw it. `status` None: no HTTP answer at all."""

    client_id: str
    started: float  # Unix time
    ended: float
    status: int | None
    request_id: str | None
    stream: bool = False
    error: str | None = None

    @property
    def answered_2xx(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def chat_body(client_id: str, spec: LoadSpec, stream: bool) -> dict[str, object]:
    return {
        "model": spec.model,
        "messages": [{"role": "user", "content": f"chaos request {client_id}: say hi"}],
        "max_tokens": spec.max_tokens,
        "stream": stream,
    }


class LoadRun:
    """`start()`, then `join()` for the outcomes; `stop()` ends it early."""

    def __init__(self, gateway_url: str, api_key: str, spec: LoadSpec, prefix: str) -> None:
        self.url = gateway_url.rstrip("/") + "/v1/chat/completions"
        self.api_key = api_key
        self.spec = spec
        self.prefix = prefix
        self.outcomes: list[Outcome] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"load-{prefix}", daemon=True)
        self.started_at = 0.0

    def start(self) -> LoadRun:
        self.started_at = time.time()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> list[Outcome]:
        # bounded: the run's own duration, plus one request timeout for the last ones
        self._thread.join(self.spec.duration_s + self.spec.timeout_s + 30)
        return list(self.outcomes)

    @property
    def sent(self) -> int:
        return len(self.outcomes)

    def _main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        spec = self.spec
        gate = asyncio.Semaphore(spec.concurrency)
        timeout = aiohttp.ClientTimeout(total=spec.timeout_s)
        connector = aiohttp.TCPConnector(limit=spec.concurrency, limit_per_host=spec.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        t0 = time.monotonic()
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            for i in range(spec.requests):
                if self._stop.is_set() or time.monotonic() - t0 >= spec.duration_s:
                    break
                if spec.rps > 0:
                    delay = t0 + i / spec.rps - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await gate.acquire()
                stream = spec.stream_every > 0 and i % spec.stream_every == spec.stream_every - 1
                task = asyncio.create_task(self._one(session, f"{self.prefix}-{i}", stream))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                task.add_done_callback(lambda _: gate.release())
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, session: aiohttp.ClientSession, client_id: str, stream: bool) -> None:
        headers = {"authorization": f"Bearer {self.api_key}", CLIENT_ID_HEADER: client_id}
        started = time.time()
        status: int | None = None
        request_id: str | None = None
        error: str | None = None
        try:
            async with session.post(
                self.url, json=chat_body(client_id, self.spec, stream), headers=headers
            ) as resp:
                status, request_id = resp.status, resp.headers.get(REQUEST_ID_HEADER)
                body = await resp.read()  # a stream to its end: a row's usage is all of it
                if stream and status == 200 and b'"error"' in body:
                    error = "error event in the stream"  # it broke after its 200
                elif status >= 400:
                    error = body[:300].decode("utf-8", "replace")  # what the refusal said
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            error = type(err).__name__
        self.outcomes.append(
            Outcome(client_id, started, time.time(), status, request_id, stream, error)
        )
