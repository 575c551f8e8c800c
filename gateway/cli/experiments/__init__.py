"""`costgate experiments start|list|show|stop|promote`: A/B experiments on an alias's
routing mix (docs/EXPERIMENTS.md).

    costgate experiments start NAME --alias auto --variant a=gpt-4o-mini \\
        --variant b=deepseek-v3.2:70,gpt-4o-mini:30 --split 50,50 --stick user \\
        [--apps search,support] [--until 2026-12-31T00:00Z | --requests 10000]
    costgate experiments list
    costgate experiments show NAME [--json]
    costgate experiments stop NAME
    costgate experiments promote NAME VARIANT     # the alias's live weights := VARIANT's

Starting, stopping and promoting change the live routing settings through
`gateway.control.routing_update.apply_routing_settings`: validated before anything is
sent, a compare-and-swap on the settings version, rolled out in place, confirmed on
every replica and audited, exactly as `costgate routing set` is.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import sys
from collections.abc import Callable
from typing import Any

from gateway.cli.config_option import add_config_option, load_for_command
from gateway.domain.environment import environment


def register(sub: Any) -> None:
    exp = sub.add_parser("experiments", help="A/B experiments on routing mixes")
    esub = exp.add_subparsers(dest="experiments_command", required=True, metavar="ACTION")

    start = esub.add_parser("start", help="start an experiment on an alias, live")
    _changing(start)
    start.add_argument("name")
    start.add_argument("--alias", required=True)
    start.add_argument("--variant", action="append", required=True, metavar="NAME=MIX",
                       help="a=MODEL or b=MODEL:WEIGHT,MODEL:WEIGHT; the first is control")
    start.add_argument("--split", default=None, help="shares per variant, e.g. 50,50 "
                       "(default: equal)")  # fmt: skip
    start.add_argument("--stick", choices=("user", "session", "request"), default="user")
    start.add_argument("--apps", default=None, help="only these apps' traffic (comma list)")
    stop_when = start.add_mutually_exclusive_group()
    stop_when.add_argument("--until", type=dt.datetime.fromisoformat, default=None)
    stop_when.add_argument("--requests", type=int, default=None)
    start.set_defaults(func=cmd_start)

    list_ = esub.add_parser("list", help="every experiment the live settings hold")
    _common(list_)
    list_.set_defaults(func=cmd_list)

    show = esub.add_parser("show", help="results per variant against the control")
    _common(show)
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)

    stop = esub.add_parser("stop", help="stop assigning (results are kept)")
    _changing(stop)
    stop.add_argument("name")
    stop.set_defaults(func=cmd_stop)

    promote = esub.add_parser("promote", help="give the alias the variant's weights, and stop")
    _changing(promote)
    promote.add_argument("name")
    promote.add_argument("variant")
    promote.set_defaults(func=cmd_promote)


def _common(p: argparse.ArgumentParser) -> None:
    add_config_option(p)
    p.add_argument("--app", default=None, help="Serve application (default: from the config)")
    p.add_argument("--dashboard", default=None, help="Ray dashboard URL (default: from the config)")


def _changing(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--note", default=None, help="why: goes into the audit trail")
    p.add_argument("--actor", default=None, help="who: the audit trail's (default cli:$USER)")
    p.add_argument("--gateway", default=None, help="gateway URL to confirm replicas on")
    p.add_argument("--no-confirm-replicas", action="store_true")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for rollout")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _apply(args: argparse.Namespace, what: str, alias: str | None,
           change: Callable[[Any, Any], Any]) -> int:  # fmt: skip
    from gateway.control.declarative import RoutingUpdateError
    from gateway.control.routing_update import apply_routing_settings
    from gateway.domain.routing_settings import RoutingError

    cfg, _ = load_for_command(args.config)
    env = environment()
    gateway = None if args.no_confirm_replicas else (args.gateway or env.gateway_url(cfg))
    try:
        result = apply_routing_settings(
            args.dashboard or env.ray_dashboard_url(cfg), args.app or cfg.gateway.app_name,
            change, actor=args.actor or f"cli:{getpass.getuser()}",
            note=args.note or f"experiment {what}", database_url=env.database_url_value,
            audit_alias=alias, cfg=cfg, gateway_url=gateway, timeout_s=args.timeout,
        )  # fmt: skip
    except (RoutingError, ValueError) as err:
        print(f"costgate experiments: refused, nothing was sent: {err}", file=sys.stderr)
        return 2
    except RoutingUpdateError as err:
        print(f"costgate experiments: {err}", file=sys.stderr)
        return 1
    print(f"{what}: routing version {result.before.version} → {result.after.version}, live on "
          f"{len(result.pids_after)} replicas {result.elapsed_s:.2f} s after it was sent; "
          f"audit #{result.audit_id}")  # fmt: skip
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    from gateway.domain.routing_settings import RoutingError
    from gateway.experiments.spec import Experiment, parse_variant

    try:
        variants = dict(parse_variant(v) for v in args.variant)
        shares = [int(s) for s in args.split.split(",")] if args.split else [1] * len(variants)
        if len(shares) != len(variants) or len(variants) != len(args.variant):
            raise ValueError("--split needs one share per --variant, and variant names once")
        exp = Experiment(alias=args.alias, variants=variants, split=dict(zip(variants, shares,
                         strict=True)), stick=args.stick, started_at=_now(), until=args.until,
                         max_requests=args.requests,
                         apps=tuple(args.apps.split(",")) if args.apps else None)  # fmt: skip
    except ValueError as err:
        print(f"costgate experiments: {err}", file=sys.stderr)
        return 2

    def change(cur: Any, static: Any) -> Any:
        if args.name in cur.experiments:
            raise RoutingError(f"an experiment named {args.name!r} exists; pick another name")
        return cur.model_copy(update={"experiments": {**cur.experiments, args.name: exp}})

    return _apply(args, f"start {args.name}", args.alias, change)


def _running(cur: Any, name: str) -> Any:
    from gateway.domain.routing_settings import RoutingError

    exp = cur.experiments.get(name)
    if exp is None:
        raise RoutingError(f"no experiment named {name!r}")
    return exp


def cmd_stop(args: argparse.Namespace) -> int:
    def change(cur: Any, static: Any) -> Any:
        exp = _running(cur, args.name)
        stopped = exp.model_copy(update={"stopped_at": exp.stopped_at or _now()})
        return cur.model_copy(update={"experiments": {**cur.experiments, args.name: stopped}})

    return _apply(args, f"stop {args.name}", None, change)


def cmd_promote(args: argparse.Namespace) -> int:
    from gateway.control.declarative import RoutingUpdateError
    from gateway.domain.routing_settings import RoutingError, check_weights

    try:  # the alias, for the audit row: the change itself re-reads under the lock
        known = _live(args)[1].experiments.get(args.name)
    except RoutingUpdateError as err:
        print(f"costgate experiments: {err}", file=sys.stderr)
        return 1

    def change(cur: Any, static: Any) -> Any:
        exp = _running(cur, args.name)
        if args.variant not in exp.variants:
            raise RoutingError(f"{args.name}: no variant {args.variant!r} "
                               f"(has {', '.join(exp.variants)})")  # fmt: skip
        weights = exp.variants[args.variant]
        check_weights(exp.alias, weights, static)
        done = exp.model_copy(update={"stopped_at": exp.stopped_at or _now(),
                                      "promoted": args.variant})  # fmt: skip
        after = cur.with_weights(exp.alias, weights)
        return after.model_copy(update={"experiments": {**cur.experiments, args.name: done}})

    alias = None if known is None else known.alias
    return _apply(args, f"promote {args.name} {args.variant}", alias, change)


def _live(args: argparse.Namespace) -> tuple[Any, Any]:
    from gateway.control.routing_update import read_routing

    cfg, _ = load_for_command(args.config)
    env = environment()
    return cfg, read_routing(args.dashboard or env.ray_dashboard_url(cfg),
                             args.app or cfg.gateway.app_name, cfg=cfg)  # fmt: skip


def cmd_list(args: argparse.Namespace) -> int:
    from gateway.control.declarative import RoutingUpdateError

    try:
        _, settings = _live(args)
    except RoutingUpdateError as err:
        print(f"costgate experiments: {err}", file=sys.stderr)
        return 1
    if not settings.experiments:
        print("no experiments")
    for name, e in settings.experiments.items():
        state = "running" if e.running(_now()) else (
            f"promoted {e.promoted}" if e.promoted else "stopped")  # fmt: skip
        mix = "; ".join(f"{v}={','.join(f'{m}:{w}' for m, w in ws.items())} ({e.split[v]})"
                        for v, ws in e.variants.items())  # fmt: skip
        print(f"{name:<20} {state:<16} {e.alias:<12} by {e.stick:<8} {mix}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from db.quality.experiment_report import build_results
    from gateway.cli.experiments.results import render_results
    from gateway.control.declarative import RoutingUpdateError

    try:
        cfg, settings = _live(args)
    except RoutingUpdateError as err:
        print(f"costgate experiments: {err}", file=sys.stderr)
        return 1
    exp = settings.experiments.get(args.name)
    if exp is None:
        print(f"costgate experiments: no experiment named {args.name!r}", file=sys.stderr)
        return 1
    results = build_results(environment().database_url_value, args.name, exp)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    else:
        print(render_results(args.name, exp, results))
    return 0
