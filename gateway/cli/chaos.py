"""`costgate chaos`: break a stack of its own on purpose and check the ledger afterwards.

    costgate chaos                       # every scenario at default sizes (about 12 min)
    costgate chaos --quick               # the smallest sizes (tests)
    costgate chaos --only db-cut,down    # some scenarios
    costgate chaos --soak 30m --rps 100  # RSS and fds of each replica under steady load

It starts the sim, a ledger behind a TCP proxy it can cut, and the gateway with
`costgate up` on ports of its own, and stops all of it at the end (also on Ctrl-C and
SIGTERM). Exit status: 0 when every scenario met its expectations, 1 when one did not,
2 when the stack could not be started.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, NoReturn

from gateway.cli.config_option import CONFIG_HELP
from gateway.domain.config import default_config_path


def register(sub: Any) -> None:
    p = sub.add_parser("chaos", help="run failure scenarios against a stack of its own")
    p.add_argument("--config", type=Path, default=None, help="base " + CONFIG_HELP)
    p.add_argument("--quick", action="store_true", help="the smallest sizes (for tests)")
    p.add_argument("--only", default=None, help="comma-separated scenarios (see --list)")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--rps", type=float, default=None, help="load rate of the scenarios/soak")
    p.add_argument("--load-seconds", type=float, default=None, help="load around each event")
    p.add_argument("--outage", type=float, default=None, help="seconds PostgreSQL stays cut")
    p.add_argument("--fuzz-examples", type=int, default=None,
                   help="schemathesis cases per operation and mode")
    p.add_argument("--big-body-mib", type=int, default=None, help="the chunked giant body")
    p.add_argument("--settle", type=float, default=None,
                   help="seconds rows may take to reach the ledger before they count as lost")
    p.add_argument("--spool-disk-kib", type=int, default=None, help="the full disk's size")
    p.add_argument("--fault-rate", type=float, default=None, help="share of upstream faults")
    p.add_argument("--soak", default=None, metavar="DURATION",
                   help="soak mode instead of the scenarios: 30m, 90s, 1h")
    p.add_argument("--sample-every", default="60s", metavar="DURATION",
                   help="soak: how often RSS and fds are sampled")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--keep-workdir", action="store_true",
                   help="keep the run's config, logs and state dir")
    p.set_defaults(func=cmd_chaos)


_SIZE_FLAGS = {"rps": "rps", "load_seconds": "load_s", "outage": "outage_s",
               "fuzz_examples": "fuzz_examples", "big_body_mib": "big_body_mib",
               "settle": "settle_s", "spool_disk_kib": "spool_disk_kib",
               "fault_rate": "fault_rate"}  # fmt: skip


def _terminate(*_: object) -> NoReturn:
    raise KeyboardInterrupt  # the `finally` below stops what the run started


def _say(line: str) -> None:
    print(line, flush=True)


def cmd_chaos(args: argparse.Namespace) -> int:
    from gateway.devtools.chaos.bookkeeping import DEFAULT, QUICK, Context
    from gateway.devtools.chaos.report import render_table
    from gateway.devtools.chaos.scenarios import UnknownScenario, run_suite, select
    from gateway.devtools.chaos.soak import SoakSpec, parse_duration, run_soak, soak_report
    from gateway.devtools.chaos.stack import ChaosStack, StackError

    try:
        names = select(args.only.split(",") if args.only else None)
        soak_s = parse_duration(args.soak) if args.soak else None
        every_s = parse_duration(args.sample_every)
    except (UnknownScenario, ValueError) as err:
        print(f"costgate chaos: {err}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(names))
        return 0
    sizes = dataclasses.replace(
        QUICK if args.quick else DEFAULT,
        **{field: getattr(args, flag) for flag, field in _SIZE_FLAGS.items()
           if getattr(args, flag) is not None},
    )  # fmt: skip
    run_id = uuid.uuid4().hex[:6]
    workdir = Path(tempfile.mkdtemp(prefix=f"costgate-chaos-{run_id}-"))
    base = Path(args.config or default_config_path()).resolve()
    signal.signal(signal.SIGTERM, _terminate)
    stack = ChaosStack(base, workdir)
    started = time.monotonic()
    _say(f"costgate chaos {run_id}: work dir {workdir}, sizes {dataclasses.asdict(sizes)}")
    try:
        stack.start(_say)
        ctx = Context(stack, sizes, run_id, _say)
        if soak_s is not None:
            spec = SoakSpec(duration_s=soak_s, rps=args.rps or 100.0,
                            sample_every_s=min(every_s, soak_s / 2),
                            warmup_s=min(30.0, soak_s / 4))  # fmt: skip
            result, samples, grown = run_soak(
                ctx, spec, lambda taken, sent: _say(
                    f"sample: {sent} requests sent; " + "; ".join(
                        f"pid {s.pid} RSS {s.rss_bytes / 2**20:.1f} MiB fds {s.fds} "
                        f"({s.sockets} sockets){' at rest' if s.at_rest else ''}"
                        for s in taken)))  # fmt: skip
            results = [result]
            _say(soak_report(result, samples, grown))
            extra: dict[str, Any] = {"samples": [dataclasses.asdict(s) for s in samples],
                                     "growth": [dataclasses.asdict(g) for g in grown]}
        else:
            results = run_suite(ctx, names, on_result=lambda r: _say(
                f"   {r.name}: {r.verdict} ({r.sent} sent, {r.lost} lost)"))
            extra = {}
    except StackError as err:
        print(f"costgate chaos: {err}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _say("stopping the stack")
        stack.stop()
        if not args.keep_workdir:
            stack.remove_workdir()
    _say("")
    _say(render_table(results))
    _say(f"\n{len(results)} scenarios in {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(
            {"run": run_id, "sizes": dataclasses.asdict(sizes),
             "results": [dataclasses.asdict(r) | {"verdict": r.verdict} for r in results],
             **extra}, indent=2))  # fmt: skip
    return 0 if all(r.verdict == "ok" for r in results) else 1
