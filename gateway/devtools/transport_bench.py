"""What each httpx transport costs per upstream request: httpx's pool, ours, httpx-aiohttp.

    python -m gateway.devtools.transport_bench [--requests 2000] [--rounds 3] [--seconds 600]

Starts the project's simulator as a child process on a free 127.0.0.1 port, with every
latency set to zero in its configuration (so the figures are the client's cost, not the
sim's sleeps), then sends the same OpenAI-style chat requests through one
`httpx.AsyncClient(transport=...)` per transport:

  httpx          httpx.AsyncHTTPTransport (httpcore's pool)
  ours           gateway.providers.aiohttp_transport.AiohttpTransport
  httpx-aiohttp  httpx_aiohttp.AiohttpTransport (PyPI; skipped when not installed)

For each round, each kind (non-streaming, streaming read with `aiter_raw()`) and each
concurrency, every transport runs one batch of --requests, the transports taking turns
(A B C, then B C A, then C A B, ...) so machine noise and position hit all alike. Per
transport it prints requests/s, p50/p99 latency and the CPU seconds this process spent
per request (time.process_time; the sim is another process and is not counted), with the
lowest and highest per-round CPU figure to show the noise. Bounded by --requests per batch
and --seconds for the whole run; the sim is stopped by its PID at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateway.devtools.bench_stats import percentile
from gateway.devtools.sim.process import SimProcess
from gateway.providers.aiohttp_transport import AiohttpTransport

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "config" / "costgate.example.yaml"
SIM_PORTS = range(19600, 19700)
MODEL = "gpt-4o"
PROMPT = "Summarise in two sentences why a gateway in front of LLM providers saves money."
_DONE = b"data: [DONE]"


# -- transports --------------------------------------------------------------------------


def _httpx_default(max_connections: int) -> httpx.AsyncBaseTransport:
    return httpx.AsyncHTTPTransport(limits=httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections,
        keepalive_expiry=30))


def _ours(max_connections: int) -> httpx.AsyncBaseTransport:
    return AiohttpTransport(max_connections=max_connections, keepalive_s=30)


def _httpx_aiohttp(max_connections: int) -> httpx.AsyncBaseTransport:
    # only for this comparison, not a dependency of the project: installed by hand
    import httpx_aiohttp

    transport: httpx.AsyncBaseTransport = httpx_aiohttp.AiohttpTransport(limits=httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections,
        keepalive_expiry=30))
    return transport


TRANSPORTS: dict[str, Callable[[int], httpx.AsyncBaseTransport]] = {
    "httpx": _httpx_default,
    "ours": _ours,
    "httpx-aiohttp": _httpx_aiohttp,
}


def _available(names: Sequence[str]) -> list[str]:
    out = []
    for name in names:
        if name == "httpx-aiohttp":
            try:
                import httpx_aiohttp  # noqa: F401
            except ImportError:
                print("httpx-aiohttp is not installed: skipped", file=sys.stderr)
                continue
        out.append(name)
    return out


# -- the sim ----------------------------------------------------------------------------


def _sim_config(workdir: Path, completion_tokens: int, per_token_ms: float) -> Path:
    config = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    config["sim"] = {
        **config.get("sim", {}),
        "default": {"ttft_ms": 0, "per_token_ms": per_token_ms, "jitter": 0,
                    "completion_tokens": [completion_tokens, completion_tokens]},
        "models": {},
        "faults": {},
        "seed": 1,
    }
    path = workdir / "sim.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


# -- one batch ---------------------------------------------------------------------------


@dataclass
class Batch:
    requests: int
    errors: int
    wall_s: float
    cpu_s: float
    latencies_s: list[float]
    timed_out: bool


@dataclass
class Cell:
    """One transport's batches for one kind and concurrency, over all rounds."""

    batches: list[Batch] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        done = sum(b.requests for b in self.batches)
        wall = sum(b.wall_s for b in self.batches)
        cpu = sum(b.cpu_s for b in self.batches)
        lat_ms = [s * 1000 for b in self.batches for s in b.latencies_s]
        per_round = [b.cpu_s / b.requests * 1000 for b in self.batches if b.requests]
        return {
            "requests": done,
            "errors": sum(b.errors for b in self.batches),
            "rps": done / wall if wall > 0 else 0.0,
            "p50_ms": percentile(lat_ms, 50),
            "p99_ms": percentile(lat_ms, 99),
            "cpu_ms_per_req": cpu / done * 1000 if done else math.nan,
            "cpu_ms_min": min(per_round, default=math.nan),
            "cpu_ms_max": max(per_round, default=math.nan),
            "rps_per_round": [b.requests / b.wall_s for b in self.batches if b.wall_s > 0],
            "cut_short": sum(b.timed_out for b in self.batches),
        }


async def _one(client: httpx.AsyncClient, url: str, body: bytes, stream: bool) -> bool:
    headers = {"content-type": "application/json"}
    if not stream:
        response = await client.post(url, content=body, headers=headers)
        return response.status_code == 200 and response.content.endswith(b"}")
    async with client.stream("POST", url, content=body, headers=headers) as response:
        tail = b""
        async for chunk in response.aiter_raw():
            tail = (tail + chunk)[-64:]
        return response.status_code == 200 and _DONE in tail


async def run_batch(client: httpx.AsyncClient, url: str, body: bytes, stream: bool,
                    requests: int, concurrency: int, max_s: float) -> Batch:
    started = 0
    errors = 0
    latencies: list[float] = []
    deadline = time.monotonic() + max_s

    async def worker() -> None:
        nonlocal started, errors
        while started < requests and time.monotonic() < deadline:
            started += 1
            t0 = time.perf_counter()
            try:
                ok = await _one(client, url, body, stream)
            except httpx.HTTPError:
                ok = False
            if ok:
                latencies.append(time.perf_counter() - t0)
            else:
                errors += 1

    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return Batch(requests=started, errors=errors, wall_s=wall, cpu_s=cpu,
                 latencies_s=latencies, timed_out=started < requests)


# -- the whole run -----------------------------------------------------------------------


async def bench(url: str, names: Sequence[str], args: argparse.Namespace
                ) -> dict[tuple[str, int, str], Cell]:
    kinds = [k == "stream" for k in args.kinds]
    bodies = {s: json.dumps({"model": MODEL, "stream": s, "max_tokens": args.completion_tokens,
                             "messages": [{"role": "user", "content": PROMPT}]},
                            separators=(",", ":")).encode() for s in (False, True)}
    timeout = httpx.Timeout(30.0, connect=5.0)
    clients = {n: httpx.AsyncClient(transport=TRANSPORTS[n](args.max_connections),
                                    timeout=timeout) for n in names}
    cells: dict[tuple[str, int, str], Cell] = {}
    batches = args.rounds * len(kinds) * len(args.concurrency) * len(names)
    per_batch_s = args.seconds / max(batches, 1)
    end = time.monotonic() + args.seconds
    try:
        # warm every pool up to the highest concurrency before anything is measured
        top = max(args.concurrency)
        for n in names:
            for s in kinds:
                await run_batch(clients[n], url, bodies[s], s, args.warmup, top, per_batch_s)
        turn = 0
        for r in range(args.rounds):
            for stream in kinds:
                for conc in args.concurrency:
                    order = [names[(turn + i) % len(names)] for i in range(len(names))]
                    turn += 1
                    for n in order:
                        if time.monotonic() >= end:
                            print("--seconds reached: stopping early", file=sys.stderr)
                            return cells
                        b = await run_batch(clients[n], url, bodies[stream], stream,
                                            args.requests, conc,
                                            min(per_batch_s, end - time.monotonic()))
                        kind = "stream" if stream else "json"
                        cells.setdefault((kind, conc, n), Cell()).batches.append(b)
                        print(f"round {r + 1} {kind:6} c={conc:<3} {n:14} "
                              f"{b.requests / b.wall_s:8.0f} req/s "
                              f"{b.cpu_s / max(b.requests, 1) * 1000:6.3f} ms CPU/req"
                              f"{'  (cut short)' if b.timed_out else ''}"
                              f"{f'  {b.errors} errors' if b.errors else ''}",
                              file=sys.stderr, flush=True)
    finally:
        for c in clients.values():
            await c.aclose()
    return cells


def render(cells: dict[tuple[str, int, str], Cell], names: Sequence[str]) -> str:
    lines = [f"{'kind':6} {'conc':>4} {'transport':14} {'req/s':>8} {'p50 ms':>7} "
             f"{'p99 ms':>7} {'CPU ms/req':>10} {'(min-max)':>13} {'reqs':>6} {'err':>4}"]
    for kind, conc in dict.fromkeys((k, c) for k, c, _ in cells):
        for n in names:
            cell = cells.get((kind, conc, n))
            if cell is None:
                continue
            s = cell.summary()
            spread = f"{s['cpu_ms_min']:.3f}-{s['cpu_ms_max']:.3f}"
            lines.append(f"{kind:6} {conc:>4} {n:14} {s['rps']:8.0f} {s['p50_ms']:7.2f} "
                         f"{s['p99_ms']:7.2f} {s['cpu_ms_per_req']:10.3f} {spread:>13} "
                         f"{s['requests']:>6} {s['errors']:>4}"
                         f"{'  cut short' if s['cut_short'] else ''}")
    return "\n".join(lines)


def _csv(cast: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    return lambda text: [cast(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.devtools.transport_bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000,
                        help="requests per batch (one transport, kind, concurrency, round)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=600.0,
                        help="time bound of the whole run; each batch gets its share")
    parser.add_argument("--concurrency", type=_csv(int), default=[1, 64],
                        help="comma-separated (default 1,64)")
    parser.add_argument("--kinds", type=_csv(str), default=["json", "stream"],
                        help="json and/or stream (default both)")
    parser.add_argument("--transports", type=_csv(str), default=list(TRANSPORTS),
                        help=f"comma-separated, of {', '.join(TRANSPORTS)}")
    parser.add_argument("--completion-tokens", type=int, default=64,
                        help="tokens in every answer (the sim's completion_tokens)")
    parser.add_argument("--per-token-ms", type=float, default=0.0,
                        help="the sim's per-token delay (default 0: one write per stream)")
    parser.add_argument("--max-connections", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=200,
                        help="unmeasured requests per transport and kind before round 1")
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1 or args.seconds <= 0:
        parser.error("--requests, --rounds and --seconds must be positive")
    if unknown := set(args.transports) - set(TRANSPORTS):
        parser.error(f"unknown transports: {', '.join(sorted(unknown))}")
    if unknown := set(args.kinds) - {"json", "stream"}:
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    names = _available(args.transports)

    with tempfile.TemporaryDirectory(prefix="transport-bench-") as tmp:
        config = _sim_config(Path(tmp), args.completion_tokens, args.per_token_ms)
        sim = SimProcess.start(config, SIM_PORTS, log_path=Path(tmp) / "sim.log")
        print(f"sim pid {sim.process.pid} at {sim.base_url}", file=sys.stderr)
        try:
            url = sim.provider_url("openai") + "/chat/completions"
            if args.loop == "uvloop":
                import uvloop

                cells = uvloop.run(bench(url, names, args))
            else:
                cells = asyncio.run(bench(url, names, args))
        finally:
            sim.stop()  # terminate() / kill() on the child's PID

    shown = " ".join(argv if argv is not None else sys.argv[1:])
    print(f"# python -m gateway.devtools.transport_bench {shown}\n"
          f"# loop={args.loop} requests/batch={args.requests} rounds={args.rounds} "
          f"completion_tokens={args.completion_tokens} per_token_ms={args.per_token_ms} "
          f"max_connections={args.max_connections}")
    print(render(cells, names))
    if args.json:
        print(json.dumps({f"{k}/c{c}/{n}": cell.summary() for (k, c, n), cell in cells.items()},
                         indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
