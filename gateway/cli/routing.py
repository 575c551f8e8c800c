"""`costgate routing show|set|history`: read and change the live routing of a running gateway.

    costgate routing show [--app NAME] [--json]
    costgate routing set auto deepseek-v3.2=0 gemini-2.5-flash=0 claude-sonnet-4.5=100 \\
        --note "deepseek incident" [--actor NAME]
    costgate routing history [--alias auto] [--limit 20]   # with each change's outcome

`set` goes through `gateway.control.routing_update`, the same path as the dashboard's editor:
validated before anything is sent, rolled out in place, confirmed on every replica,
audited in the ledger. With `routing.target: kuberay` in the config both commands work on
the RayService through the Kubernetes API instead (docs/kuberay.md).
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from gateway.cli.config_option import add_config_option, load_for_command
from gateway.domain.environment import environment


def register(sub: Any) -> None:
    routing = sub.add_parser("routing", help="show or change live routing weights")
    rsub = routing.add_subparsers(dest="routing_command", required=True, metavar="ACTION")

    show = rsub.add_parser("show", help="the weights and knobs the running gateway uses")
    _common(show)
    show.add_argument("--json", action="store_true", help="print the settings as JSON")
    show.set_defaults(func=cmd_show)

    set_ = rsub.add_parser("set", help="set one alias's weights on every replica, live")
    _common(set_)
    set_.add_argument("alias", help="the alias to change, e.g. auto")
    set_.add_argument("weights", nargs="+", metavar="MODEL=WEIGHT", help="relative weights")
    set_.add_argument("--note", required=True, help="why: goes into the audit trail")
    set_.add_argument(
        "--actor", default=None, help="who: goes into the audit trail (default cli:$USER)"
    )
    set_.add_argument(
        "--gateway",
        default=None,
        help="gateway URL to confirm every replica's version on (default: from the config)",
    )
    set_.add_argument(
        "--no-confirm-replicas",
        action="store_true",
        help="trust Serve's deployment status instead of asking the replicas",
    )
    set_.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for rollout")
    set_.set_defaults(func=cmd_set)

    history = rsub.add_parser("history", help="recent routing changes from the audit trail")
    _common(history)
    history.add_argument("--alias", default=None)
    history.add_argument("--limit", type=int, default=20)
    history.set_defaults(func=cmd_history)


def _common(p: argparse.ArgumentParser) -> None:
    add_config_option(p)
    p.add_argument("--app", default=None, help="Serve application (default: from the config)")
    p.add_argument("--dashboard", default=None, help="Ray dashboard URL (default: from the config)")


def _context(args: argparse.Namespace) -> tuple[Any, str, str]:
    cfg, _ = load_for_command(args.config)
    env = environment()
    dashboard = args.dashboard or env.ray_dashboard_url(cfg)
    return cfg, dashboard, args.app or cfg.gateway.app_name


def _percentages(weights: dict[str, Any]) -> dict[str, float]:
    total = sum(weights.values())
    return {m: float(w / total * 100) if total else 0.0 for m, w in weights.items()}


def cmd_show(args: argparse.Namespace) -> int:
    from gateway.control.declarative import RoutingUpdateError
    from gateway.control.routing_update import read_live_routing, uses_kuberay

    cfg, dashboard, app = _context(args)
    try:
        live = read_live_routing(dashboard, app, cfg=cfg)
    except RoutingUpdateError as err:
        print(f"costgate routing: {err}", file=sys.stderr)
        return 1
    s = live.settings
    if args.json:
        print(json.dumps(s.model_dump(mode="json"), indent=2))
        return 0
    print(f"app {app} · deployment {live.ingress} · routing version {s.version}")
    try:
        kuberay = uses_kuberay(cfg)
    except RoutingUpdateError:
        kuberay = False
    if kuberay:
        # a RayService's spec names no processes: its status and the replicas do
        import os

        from gateway.domain.routing_target import effective_target

        k = effective_target(cfg.routing, os.environ).kuberay
        print(f"from the RayService {k.namespace or '(default namespace)'}/{k.rayservice}")
    else:
        print(f"replicas (PIDs): {', '.join(map(str, live.pids)) or 'none running'}")
    for alias in cfg.aliases:
        weights = s.weights_for(alias, cfg)
        shares = _percentages(weights)
        print(f"\n{alias}")
        for model, w in weights.items():
            print(f"  {model:<28} {str(w):>8}  {shares[model]:5.1f}%")
    p = s.policy
    print(f"\npolicy (normal): {p.latency_weight} × latency + {p.cost_weight} × cost")
    for model, caps in s.caps.items():
        print(f"cap {model}: rpm {caps.rpm or '-'} · tpm {caps.tpm or '-'}")
    b, r = s.breaker, s.retries
    print(
        f"breaker: opens at {b.error_rate:.0%} errors over {b.window_s:g} s "
        f"(min {b.min_requests} requests), cool-down {b.cooldown_s:g} s"
    )
    print(
        f"retries: {r.max_attempts} attempts ({r.max_attempts_per_model} per model), "
        f"backoff {r.base_delay_s:g}-{r.max_delay_s:g} s, Retry-After cap {r.retry_after_cap_s:g} s"
    )
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    from gateway.control.declarative import RoutingUpdateError
    from gateway.control.routing_update import apply_routing_change
    from gateway.domain.routing_settings import RoutingError, parse_weight_args

    cfg, dashboard, app = _context(args)
    try:
        weights = parse_weight_args(args.weights)
    except RoutingError as err:
        print(f"costgate routing: {err}", file=sys.stderr)
        return 2
    gateway = None
    if not args.no_confirm_replicas:
        gateway = args.gateway or environment().gateway_url(cfg)
    actor = args.actor or f"cli:{getpass.getuser()}"
    try:
        result = apply_routing_change(
            dashboard,
            app,
            args.alias,
            weights,
            actor,
            args.note,
            environment().database_url_value,
            cfg=cfg,
            gateway_url=gateway,
            timeout_s=args.timeout,
        )
    except RoutingError as err:
        print(f"costgate routing: refused, nothing was sent: {err}", file=sys.stderr)
        return 2
    except RoutingUpdateError as err:
        print(f"costgate routing: {err}", file=sys.stderr)
        return 1
    before = result.before.weights_for(args.alias, cfg)
    after = result.after.weights_for(args.alias, cfg)
    print(f"{args.alias}: version {result.before.version} → {result.after.version}")
    for model in dict.fromkeys([*before, *after]):
        old, new = before.get(model, "-"), after.get(model, "-")
        print(f"  {model:<28} {str(old):>8} → {new}")
    if not result.pids_before:
        # KubeRay: the RayService names no PIDs before the change
        how = "confirmed by each replica" if result.pids_after else "as KubeRay reports"
    else:
        how = "in place, same PIDs" if result.in_place else "replicas were replaced"
    print(
        f"live on {len(result.pids_after)} replicas ({how}) {result.elapsed_s:.2f} s after "
        f"the update was sent; audit #{result.audit_id}"
    )
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from db.routing_audit import list_routing_changes

    cfg, _, app = _context(args)
    rows = list_routing_changes(
        environment().database_url_value, app_name=app, alias=args.alias, limit=args.limit
    )
    if not rows:
        print("no routing changes recorded")
    for r in rows:
        when = r.changed_at.strftime("%Y-%m-%d %H:%M:%S %Z")
        # the settings versions the change went from and to; rows from before they were
        # recorded have none
        versions = (
            f" v{r.version_before}→v{r.version_after}" if r.version_before is not None else ""
        )
        print(
            f"#{r.id} {when} {r.status.upper()}{versions} {r.actor} "
            f"{r.alias or '(settings)'}: {r.before} → {r.after}"
        )
        if r.note:
            print(f"    {r.note}")
    return 0
