"""`costgate bench`: the gateway's latency and throughput, side by side with the sim's."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from contextlib import nullcontext
from typing import Any

from gateway.domain.environment import environment

DEFAULT_GATEWAY = "http://127.0.0.1:8000/v1"
# what the `attributed` target sends: an end user, a session and three tags
ATTRIBUTION_HEADERS = (
    ("x-costgate-user", "bench-customer-1"),
    ("x-costgate-session", "bench-session-1"),
    ("x-costgate-tags", "feature=bench,env=perf,plan=pro"),
)
# the gateway targets that set its response cache per request (gateway.devtools.bench)
CACHE_TARGETS = {"cache-off": "off", "cache-miss": "miss", "cache-hit": "hit"}


def _default_api_key() -> str | None:
    key = environment().api_key
    return key.get_secret_value() if key else None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="load the gateway and the sim directly; report the overhead",
        description="Send the same bounded load to the gateway and straight to the "
        "simulated upstream, in turns, and report requests/s, latency and (streams) time "
        "to first token percentiles for each, and the gateway's overhead per percentile.",
    )
    parser.add_argument("--config", help="configuration file, to find the model's upstream")
    parser.add_argument("--gateway", default=DEFAULT_GATEWAY,
                        help=f"the gateway's OpenAI base URL (default {DEFAULT_GATEWAY})")
    parser.add_argument("--api-key", default=_default_api_key(),
                        help="gateway key (default: $COSTGATE_API_KEY)")
    parser.add_argument("--sim", help="the sim's root URL, e.g. http://127.0.0.1:9100 "
                        "(default: the model's provider base_url in the config)")
    parser.add_argument("--model", default="gpt-4o-mini",
                        help="a concrete public model name (default gpt-4o-mini)")
    parser.add_argument("--targets", default="direct,gateway",
                        help="comma-separated: direct, gateway, limited, attributed, cache-off, "
                        "cache-miss, cache-hit (default direct,gateway; limited: the gateway "
                        "with --limited-api-key; attributed: the gateway with an end user, a "
                        "session and tags on every request, with --attributed-api-key (e.g. "
                        "a key whose app has an each-user budget); experiment: the gateway "
                        "on --experiment-model, an alias with an experiment running (each "
                        "request assigned); cache-*: the gateway with "
                        "its response cache "
                        "off, on at a 0%% hit rate (a new prompt each), on at 100%%)")
    parser.add_argument("--limited-api-key", default=None,
                        help="a second gateway key, one under a budget and rate limits: "
                        "the `limited` target, to measure what those checks cost")
    parser.add_argument("--attributed-api-key", default=None,
                        help="the `attributed` target's key (default: --api-key)")
    parser.add_argument("--experiment-model", default=None,
                        help="the `experiment` target's model: an alias with an experiment "
                        "(sticky by request) running on it")
    parser.add_argument("--requests", type=int, default=1000,
                        help="requests per target (default 1000)")
    parser.add_argument("--duration", type=float, default=30.0,
                        help="at most this many seconds per target (default 30)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--concurrencies", default=None, metavar="N[,N...]",
                        help="run the whole bench at each of these concurrencies, one "
                        "table each, in one run (e.g. 1,64); overrides --concurrency")
    parser.add_argument("--endpoints", default="chat.completions",
                        help="comma-separated APIs to bench side by side: chat.completions, "
                        "responses, completions, embeddings, messages (default chat.completions); "
                        "targets other than chat are named direct:<api> and gateway:<api>")
    parser.add_argument("--stream", action="store_true", help="stream, and measure TTFT")
    parser.add_argument("--max-tokens", type=int, default=64, help="max_tokens per request")
    parser.add_argument("--warmup", type=int, default=None,
                        help="requests per target before measuring, so every connection is "
                        "open (default: twice the concurrency, at least 20)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="targets take turns this many times (default 2)")
    parser.add_argument("--upstream-ms", metavar="TTFT[,PER_TOKEN]",
                        help="set the sim's latency for the model during the run through "
                        "its control API, e.g. 0 (pure overhead) or 200,0 (the sim is found "
                        "like the direct target: --sim, or the provider's base_url)")
    parser.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
    parser.add_argument("--profile", action="store_true",
                        help="also print the CPU per request of every process category: "
                        "the replicas, HAProxy and Ray's other processes of the head "
                        "`costgate up` started (found by $COSTGATE_STATE_DIR, as `down` "
                        "finds them), the sim (the process on --sim's port) and the client")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    from gateway.devtools.bench import (
        ENDPOINT_PATHS,
        BenchError,
        Target,
        resolve_direct_target,
    )
    from gateway.domain.config import ConfigError, default_config_path, load_config

    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = set(names) - {"direct", "gateway", "limited", "attributed", "experiment",
                            *CACHE_TARGETS}  # fmt: skip
    if unknown or not names:
        print("--targets: expected direct, gateway, limited, attributed, experiment or "
              f"{', '.join(CACHE_TARGETS)}, "
              f"got {args.targets!r}", file=sys.stderr)
        return 2
    try:
        levels = [int(c) for c in (args.concurrencies or str(args.concurrency)).split(",")]
    except ValueError:
        levels = [0]
    if any(c <= 0 for c in levels):
        print("--concurrencies: expected whole numbers above 0", file=sys.stderr)
        return 2
    direct: Any = None
    if "limited" in names and not args.limited_api_key:
        print("--targets limited needs --limited-api-key", file=sys.stderr)
        return 2
    if "experiment" in names and not args.experiment_model:
        print("--targets experiment needs --experiment-model", file=sys.stderr)
        return 2
    for flag in ("requests", "concurrency", "duration"):
        if getattr(args, flag) <= 0:
            print(f"--{flag} must be above 0", file=sys.stderr)
            return 2
    try:
        latency = _upstream_ms(args.upstream_ms)
    except ValueError as err:
        print(f"--upstream-ms: {err}", file=sys.stderr)
        return 2
    endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
    if not endpoints or set(endpoints) - set(ENDPOINT_PATHS):
        print(f"--endpoints: expected some of {', '.join(ENDPOINT_PATHS)}, got "
              f"{args.endpoints!r}", file=sys.stderr)
        return 2
    targets: list[Target] = []
    try:
        if "direct" in names or latency:
            config = load_config(args.config or default_config_path())
            direct = resolve_direct_target(config, args.model, args.sim)
    except (ConfigError, BenchError) as err:
        print(err, file=sys.stderr)
        return 2
    keys = {"gateway": args.api_key, "limited": args.limited_api_key,
            "attributed": args.attributed_api_key or args.api_key, "experiment": args.api_key}
    for endpoint in endpoints:
        suffix = "" if endpoint == "chat.completions" else f":{endpoint}"
        # in the order given: targets take turns in it, and what runs right after a
        # gateway target finds that target's ledger rows still being written
        for name in dict.fromkeys(names):
            if name == "direct":
                targets.append(dataclasses.replace(direct, name="direct" + suffix,
                                                   endpoint=endpoint))
            elif name in CACHE_TARGETS:
                targets.append(Target(name + suffix, args.gateway, args.model, args.api_key,
                                      endpoint, cache=CACHE_TARGETS[name]))
            else:
                extra = ATTRIBUTION_HEADERS if name == "attributed" else ()
                model = args.experiment_model if name == "experiment" else args.model
                targets.append(Target(name + suffix, args.gateway, model, keys[name],
                                      endpoint, headers=extra))
    failed = False
    for level in levels:
        if not _bench_at(args, level, targets, endpoints, direct if latency else None, latency):
            failed = True
    return 1 if failed else 0


def _bench_at(args: argparse.Namespace, concurrency: int, targets: list[Any],
              endpoints: list[str], direct: Any, latency: tuple[float, float] | None) -> bool:
    """One bench at one concurrency, printed; False when every request failed."""
    import uvloop

    from gateway.devtools.bench import BenchError, Load, run_bench, upstream_latency
    from gateway.devtools.bench_stats import build_report, render_table

    load = Load(requests=args.requests, duration_s=args.duration,
                concurrency=concurrency, stream=args.stream, max_tokens=args.max_tokens,
                warmup=max(20, 2 * concurrency) if args.warmup is None else args.warmup,
                rounds=args.rounds, timeout_s=args.timeout)
    meter = _meter(args, targets) if args.profile else None
    try:
        with upstream_latency(direct, *latency) if latency else nullcontext():
            summaries = uvloop.run(run_bench(targets, load, meter))
    except BenchError as err:
        print(err, file=sys.stderr)
        return False
    report = build_report({**load.as_dict(), "model": args.model, "endpoints": endpoints},
                          summaries)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"model {args.model}, endpoints {', '.join(endpoints)}, "
              f"concurrency {load.concurrency}, "
              f"{'streaming' if load.stream else 'non-streaming'}, "
              f"max_tokens {load.max_tokens}; latency in ms")
        print(render_table(report))
    return not all(s.errors == s.requests for s in summaries)


def _meter(args: argparse.Namespace, targets: list[Any]) -> Any:
    from db.embedded import state_dir
    from gateway.devtools.bench import sim_root
    from gateway.devtools.bench.profile import ProcessMeter

    sim = args.sim or next((sim_root(t) for t in targets if t.name.startswith("direct")), None)
    return ProcessMeter(state_dir(), sim).read


def _upstream_ms(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    parts = [float(p) for p in text.split(",")]
    if len(parts) > 2 or any(p < 0 for p in parts):
        raise ValueError(f"expected TTFT[,PER_TOKEN] in ms, at least 0; got {text!r}")
    return parts[0], parts[1] if len(parts) == 2 else 0.0
