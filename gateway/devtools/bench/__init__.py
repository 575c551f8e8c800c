"""`costgate bench`'s load: the same requests against the gateway and straight at the sim.

The client shares the machine's cores with what it measures, so it is aiohttp (measured
here at 64 concurrent requests against the sim: about 5-10x the requests/s of an
httpx.AsyncClient on the same load) on uvloop, with each request body encoded once.
Targets take turns in rounds, so a noisy neighbour on a shared machine hurts both alike.
Each target calls one API (`--endpoints`): chat completions, Responses, legacy completions
or embeddings, so their overheads can be compared side by side in one run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

import aiohttp

from gateway.devtools.bench.profile import CATEGORIES, Meter, add
from gateway.devtools.bench_stats import Sample, TargetSummary, summarize
from gateway.domain.config import Config

# first non-empty content delta: the role chunk has "content":"" and does not count
# (Responses deltas are "delta", legacy completions "text")
_FIRST_CONTENT = re.compile(rb'"(?:content|arguments|delta|text)":\s*"[^"]')
# how a complete stream ends: [DONE], or a Responses stream's terminal event
_ENDS = (b"data: [DONE]", b"event: response.completed", b"event: response.incomplete",
         b"event: message_stop")
ENDPOINT_PATHS = {
    "chat.completions": "/chat/completions",
    "responses": "/responses",
    "completions": "/completions",
    "embeddings": "/embeddings",
    "messages": "/messages",  # Anthropic's Messages API
}
DEFAULT_PROMPT = (
    "You are a helpful assistant. Summarise in two sentences why a gateway in front of "
    "several LLM providers can lower cost without hurting latency."
)


class BenchError(ValueError):
    """A bench that cannot run as asked; the message says why."""


@dataclass(frozen=True)
class Target:
    name: str
    base_url: str  # an OpenAI base URL: .../v1
    model: str
    api_key: str | None = None
    endpoint: str = "chat.completions"  # a key of ENDPOINT_PATHS
    # the gateway's response cache: None (as configured), "off", "miss" (on, every prompt
    # new: a 0% hit rate, what the lookup and the store cost) or "hit" (on, one prompt)
    cache: str | None = None
    # headers of its own on every request (the `attributed` target: an end user, a
    # session and tags, whose cost against a plain request the bench shows)
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + ENDPOINT_PATHS[self.endpoint]


@dataclass(frozen=True)
class Load:
    requests: int = 1000
    duration_s: float = 30.0
    concurrency: int = 8
    stream: bool = False
    max_tokens: int | None = 64
    prompt: str = DEFAULT_PROMPT
    warmup: int = 20
    rounds: int = 2
    timeout_s: float = 60.0

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out.pop("prompt")
        return out


def resolve_direct_target(config: Config, model: str, sim_url: str | None = None,
                          api_key: str | None = None) -> Target:
    """The sim URL and upstream model id that serve a public model name.

    `sim_url` (the sim's root, http://host:port) replaces the provider's configured
    host; without it the provider's base_url is used as it stands.
    """
    found = config.model(model)
    if found is None:
        if model in config.aliases:
            names = ", ".join(config.aliases[model].candidates)
            raise BenchError(f"{model!r} is an alias, which has no single upstream to compare "
                             f"with; bench one of its models: {names}")
        raise BenchError(f"unknown model {model!r}: not in the configuration")
    provider = config.provider(found.provider)
    base_url = provider.base_url
    if sim_url:
        base_url = f"{sim_url.rstrip('/')}/{provider.name}/v1"
    return Target("direct", base_url, found.upstream_model, api_key or provider.api_key())


def sim_root(target: Target) -> str:
    """The sim's own address (scheme://host:port) behind a direct target's base URL."""
    parts = urlsplit(target.base_url)
    return f"{parts.scheme}://{parts.netloc}"


@contextmanager
def upstream_latency(target: Target, ttft_ms: float, per_token_ms: float) -> Iterator[None]:
    """Give the sim fixed latencies for the target's model during the run, then undo it.

    Through the sim's control API, so the same sim serves the gateway and the direct
    target with the same figures (e.g. 0 ms to measure pure overhead, or 200 ms).
    """
    import httpx

    root = sim_root(target)
    figures = {"model": target.model, "ttft_ms": ttft_ms, "per_token_ms": per_token_ms,
               "jitter": 0}
    try:
        response = httpx.put(f"{root}/_sim/behaviour", json=figures, timeout=10)
    except httpx.HTTPError as err:
        raise BenchError(f"cannot reach the sim's control API at {root}: {err}") from None
    if response.status_code != 200:
        raise BenchError(f"the sim at {root} refused {figures}: {response.text}")
    try:
        yield
    finally:
        httpx.delete(f"{root}/_sim/behaviour", params={"model": target.model}, timeout=10)


def request_body(model: str, load: Load, endpoint: str = "chat.completions") -> bytes:
    """The same prompt and length cap, in the shape of each API."""
    body: dict[str, object] = {"model": model}
    if endpoint == "embeddings":
        return json.dumps({**body, "input": load.prompt, "encoding_format": "float"}).encode()
    if endpoint == "responses":
        body["input"] = load.prompt
    elif endpoint == "completions":
        body["prompt"] = load.prompt
    else:
        body["messages"] = [{"role": "user", "content": load.prompt}]
    if load.max_tokens:
        body["max_output_tokens" if endpoint == "responses" else "max_tokens"] = load.max_tokens
    elif endpoint == "messages":
        body["max_tokens"] = 1024  # Anthropic's API requires it
    if load.stream:
        body["stream"] = True
        # Responses and Messages streams always carry their usage
        if endpoint not in ("responses", "messages"):
            body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def has_first_token(sse: bytes) -> bool:
    """Whether these stream bytes hold a non-empty content (or tool argument) delta."""
    return _FIRST_CONTENT.search(sse) is not None


def _headers(target: Target) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if target.cache is not None:
        headers["x-costgate-cache"] = "off" if target.cache == "off" else "on"
    if target.api_key:
        headers["authorization"] = f"Bearer {target.api_key}"
    headers.update(target.headers)
    return headers


async def _one(session: aiohttp.ClientSession, target: Target, body: bytes,
               headers: dict[str, str], stream: bool) -> Sample:
    started = time.perf_counter()
    ttft = None
    try:
        async with session.post(target.url, data=body, headers=headers) as response:
            if response.status >= 400:
                await response.read()
                return Sample(time.perf_counter() - started, error=f"http_{response.status}")
            if not stream:
                payload = await response.read()
                try:
                    json.loads(payload)
                except ValueError:
                    return Sample(time.perf_counter() - started, error="bad_json")
                return Sample(time.perf_counter() - started)
            seen, tail, ended = b"", b"", False
            async for data in response.content.iter_any():
                if ttft is None:
                    seen += data
                    if has_first_token(seen):
                        ttft = time.perf_counter() - started
                        seen = b""
                if not ended:
                    window = tail + data
                    ended = any(end in window for end in _ENDS)
                tail = (tail + data)[-32:]
            latency = time.perf_counter() - started
            if not ended:
                return Sample(latency, ttft, error="incomplete_stream")
            return Sample(latency, ttft)
    except TimeoutError:
        return Sample(time.perf_counter() - started, error="timeout")
    except aiohttp.ClientError as err:
        return Sample(time.perf_counter() - started, error=type(err).__name__)


async def _drive(session: aiohttp.ClientSession, target: Target, load: Load, count: int,
                 seconds: float) -> tuple[list[Sample], float]:
    """`count` requests by `load.concurrency` workers, or until `seconds` pass."""
    body, headers = request_body(target.model, load, target.endpoint), _headers(target)
    unique = target.cache in ("off", "miss")  # a new prompt each: no request can hit
    samples: list[Sample] = []
    stream = load.stream and target.endpoint != "embeddings"  # embeddings never stream
    remaining = count
    started = time.perf_counter()
    deadline = started + seconds

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0 and time.perf_counter() < deadline:
            remaining -= 1
            sent = _unique_body(target, load) if unique else body
            samples.append(await _one(session, target, sent, headers, stream))

    await asyncio.gather(*(worker() for _ in range(load.concurrency)))
    return samples, time.perf_counter() - started


_NONCE = itertools.count()


def _unique_body(target: Target, load: Load) -> bytes:
    prompt = f"{load.prompt} (#{time.time_ns()}-{next(_NONCE)})"
    return request_body(target.model, dataclasses.replace(load, prompt=prompt), target.endpoint)


def _session(load: Load) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=load.concurrency, limit_per_host=load.concurrency,
                                     keepalive_timeout=60, enable_cleanup_closed=True)
    return aiohttp.ClientSession(connector=connector,
                                 timeout=aiohttp.ClientTimeout(total=load.timeout_s))


async def run_bench(targets: list[Target], load: Load,
                    meter: Meter | None = None) -> list[TargetSummary]:
    """Warm each target up, then run `load` on each in turns; one summary per target.

    With a `meter` (`--profile`), the CPU of every process category is read around each
    turn and summed per target (gateway.devtools.bench.profile)."""
    sessions = {t.name: _session(load) for t in targets}
    samples: dict[str, list[Sample]] = {t.name: [] for t in targets}
    elapsed = dict.fromkeys(samples, 0.0)
    cpu = dict.fromkeys(samples, 0.0)
    spent = {t.name: dict.fromkeys(CATEGORIES, 0.0) for t in targets}
    try:
        for t in targets:
            if load.warmup:
                await _drive(sessions[t.name], t, load, load.warmup, load.duration_s)
        rounds = max(1, min(load.rounds, load.requests))
        for r in range(rounds):
            share = load.requests // rounds + (1 if r < load.requests % rounds else 0)
            for t in targets:
                before = await asyncio.to_thread(meter) if meter else None
                cpu_before = time.process_time()
                got, took = await _drive(sessions[t.name], t, load, share,
                                         load.duration_s / rounds)
                cpu[t.name] += time.process_time() - cpu_before
                if meter and before is not None:
                    add(spent[t.name], before, await asyncio.to_thread(meter))
                samples[t.name].extend(got)
                elapsed[t.name] += took
    finally:
        for session in sessions.values():
            await session.close()
    return [summarize(t.name, t.url, t.model, samples[t.name], elapsed[t.name], cpu[t.name],
                      process_cpu_s=spent[t.name] if meter else None)
            for t in targets]
