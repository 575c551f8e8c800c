"""`costgate down`, `join`, `leave`, `scale`, `status`, `serve-config` and `demo`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from gateway.cli.config_option import add_config_option, load_for_command
from gateway.domain.environment import environment


def register(sub: Any) -> None:
    down = sub.add_parser("down", help="stop the gateway and the Ray head that `up` started")
    add_config_option(down)
    down.add_argument(
        "--keep-db", action="store_true", help="leave the embedded PostgreSQL running"
    )
    down.add_argument(
        "--drain-timeout", type=float, default=None, metavar="SECONDS",
        help="how long to let replicas finish their requests and flush the ledger before "
        "the Ray head is stopped (default: gateway.graceful_shutdown_timeout_s + 30 s)",
    )
    down.set_defaults(func=cmd_down)

    join = sub.add_parser("join", help="add this machine to the cluster as a worker node")
    add_config_option(join)
    join.add_argument("--address", required=True, metavar="HEAD:PORT",
                      help="the head's GCS address (gateway.ray.head_port on the head)")
    join.add_argument("--node-ip", default="127.0.0.1",
                      help="this node's address, as the head and load balancer reach it")
    join.add_argument("--port", type=int, default=None,
                      help="this node's ingress port (default: gateway.port if free, else any)")
    join.add_argument("--num-cpus", type=int, default=None)
    join.set_defaults(func=cmd_join)

    leave = sub.add_parser("leave", help="drain a worker node joined from here and stop it")
    add_config_option(leave)
    leave.add_argument("--node", default=None, help="its name (`costgate status`); default: "
                       "the only node joined from this state dir")
    leave.add_argument("--drain-timeout", type=float, default=None, metavar="SECONDS")
    leave.set_defaults(func=cmd_leave)

    scale = sub.add_parser("scale", help="change the gateway's replica count live")
    add_config_option(scale)
    scale.add_argument("replicas", type=int, nargs="?", default=None)
    scale.add_argument("--min", type=int, default=None, dest="min_replicas",
                       help="autoscaling lower bound")
    scale.add_argument("--max", type=int, default=None, dest="max_replicas",
                       help="autoscaling upper bound")
    for flag, key in AUTOSCALING_FLAGS.items():
        scale.add_argument(flag, type=float, default=None, dest=key,
                           help=f"autoscaling_config.{key}")
    scale.add_argument("--max-per-node", type=int, default=None,
                       help="at most this many replicas on one node (restarts them)")
    scale.add_argument("--timeout", type=float, default=180.0)
    scale.set_defaults(func=cmd_scale)

    status = sub.add_parser("status", help="nodes, replicas, routing version, ledger writers")
    add_config_option(status)
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.set_defaults(func=cmd_status)

    sc = sub.add_parser("serve-config", help="print the generated declarative Serve config")
    add_config_option(sc)
    sc.set_defaults(func=cmd_serve_config)

    demo = sub.add_parser("demo", help="sim, gateway, traffic and dashboard, in the foreground")
    add_config_option(demo)
    demo.add_argument("--requests", type=int, default=5000, help="traffic bound (requests)")
    demo.add_argument("--duration", type=float, default=3600.0, help="traffic bound (seconds)")
    demo.add_argument("--no-traffic", action="store_true", help="start everything but traffic")
    demo.set_defaults(func=cmd_demo)


# `costgate scale` flags for Serve's other autoscaling_config keys
AUTOSCALING_FLAGS = {
    "--target-ongoing": "target_ongoing_requests",
    "--upscale-delay": "upscale_delay_s",
    "--downscale-delay": "downscale_delay_s",
    "--look-back": "look_back_period_s",
}


def _load(args: argparse.Namespace) -> tuple[Any, Path]:
    return load_for_command(args.config)


def _state_dir() -> Path:
    from db.embedded import state_dir

    return state_dir()


def _cache_line(cfg: Any) -> str:
    """The response cache's backend and whether replicas share it: `up` always gives the
    replicas the ledger's database (embedded or DATABASE_URL), so without Redis it is the
    shared table."""
    from gateway.replica.cache.backends import describe_backend

    name, shared = describe_backend(cfg.cache.redis_url, database=True)
    return (f"response cache: {name}, "
            f"{'shared by every replica and node' if shared else 'one per replica'}")


def _reason(err: Exception) -> str:
    """The first line of a driver error: what went wrong, never the URL (it may hold a
    password) nor a traceback."""
    orig = getattr(err, "orig", None) or err
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0][:200]


def _wait_for_stop_signal() -> None:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(3600):
        pass


def cmd_down(args: argparse.Namespace) -> int:
    from db.embedded import stop_embedded
    from gateway.control.cluster import (
        DRAINED_HEAD_GRACE_S,
        HEAD_GRACE_S,
        ClusterPaths,
        shutdown_serve,
        started_by_us,
        stop_head,
    )

    cfg, _ = _load(args)
    paths = ClusterPaths(_state_dir())
    drained = shutdown_serve(cfg, args.drain_timeout, progress=print)
    if not drained:
        print("replicas still draining when the drain timeout ran out: the rows of their "
              "requests in flight may be lost", file=sys.stderr)  # fmt: skip
    left: tuple[int, ...] = ()
    if started_by_us(paths) or paths.temp_dir.exists():
        stopped = stop_head(paths, DRAINED_HEAD_GRACE_S if drained else HEAD_GRACE_S)
        left = stopped.remaining
        print(f"stopped the Ray head ({stopped.count - len(left)} processes)")
        if left:
            # named by pid, so that an operator can look at them; `down` again retries
            print("these processes of the Ray head are still running: pids "
                  f"{', '.join(map(str, left))}", file=sys.stderr)  # fmt: skip
    from gateway.control.nodes import node_records, nodes_dir, stop_node

    for record in node_records(paths.state_dir):
        # a worker outlives its head only as a process waiting for a GCS that is gone
        print(f"stopped worker node {record['name']} ({stop_node(record)} processes)")
        (nodes_dir(paths.state_dir) / f"{record['name']}.json").unlink(missing_ok=True)
    if not args.keep_db and environment().database_url is None and stop_embedded():
        print("stopped the embedded PostgreSQL")
    return 1 if left else 0


def cmd_serve_config(args: argparse.Namespace) -> int:
    from gateway.control.serve_config import serve_config

    cfg, path = _load(args)
    print(json.dumps(serve_config(cfg, config_path=path, state_dir=_state_dir()), indent=2))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from gateway.devtools.demo import run_demo

    cfg, path = _load(args)
    return run_demo(cfg, path, args)


def cmd_join(args: argparse.Namespace) -> int:
    from gateway.control.cluster import ClusterError, dashboard_url
    from gateway.control.nodes import join, plan_node

    cfg, _ = _load(args)
    state = _state_dir()
    plan = plan_node(cfg, state, args.address, node_ip=args.node_ip, http_port=args.port,
                     num_cpus=args.num_cpus)  # fmt: skip
    env = dict(os.environ)
    env["COSTGATE_STATE_DIR"] = str(state)
    try:
        record = join(cfg, state, plan, env, dashboard_url(cfg))
    except ClusterError as err:
        print(f"costgate join: {err}", file=sys.stderr)
        return 1
    print(f"joined as {record['name']} (Ray node {record['node_id']}); its ingress: "
          f"http://{plan.node_ip}:{plan.http_port}/v1", flush=True)  # fmt: skip
    return 0


def cmd_leave(args: argparse.Namespace) -> int:
    from gateway.control.cluster import dashboard_url, drain_timeout_s
    from gateway.control.nodes import leave, node_records

    cfg, _ = _load(args)
    state = _state_dir()
    records = [r for r in node_records(state) if args.node in (None, r["name"])]
    if len(records) != 1:
        names = ", ".join(r["name"] for r in node_records(state)) or "none"
        print(f"costgate leave: name the node with --node (joined from here: {names})",
              file=sys.stderr)  # fmt: skip
        return 1
    timeout = args.drain_timeout or drain_timeout_s(cfg)
    drained, stopped = leave(records[0], state, dict(os.environ), dashboard_url(cfg),
                             drain_timeout_s=timeout)  # fmt: skip
    if not drained:
        print("the node's replicas were not drained in time: the rows of their requests in "
              "flight may be lost", file=sys.stderr)  # fmt: skip
    print(f"node {records[0]['name']} left ({stopped} processes stopped)")
    return 0


def cmd_scale(args: argparse.Namespace) -> int:
    from gateway.control.cluster import dashboard_url
    from gateway.control.replicas import ScaleError, scale

    cfg, _ = _load(args)
    auto = {k: getattr(args, k) for k in AUTOSCALING_FLAGS.values() if getattr(args, k) is not None}
    if auto and args.min_replicas is None and args.max_replicas is None:
        print("costgate scale: autoscaling options need --min and/or --max", file=sys.stderr)
        return 1
    try:
        state = scale(cfg, dashboard_url(cfg), replicas=args.replicas,
                      min_replicas=args.min_replicas, max_replicas=args.max_replicas,
                      autoscaling=auto, max_per_node=args.max_per_node,
                      timeout_s=args.timeout)  # fmt: skip
    except ScaleError as err:
        print(f"costgate scale: {err}", file=sys.stderr)
        return 1
    print(f"{state['deployment']}: {state['running']} replicas running "
          f"(target {state['target']})")  # fmt: skip
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from gateway.control.cluster import dashboard_url, gateway_url
    from gateway.control.nodes import node_records
    from gateway.control.replicas import cluster_status
    from gateway.control.serve_admin import ServeAdminError

    cfg, _ = _load(args)
    ports = {r["node_id"]: r["http_port"] for r in node_records(_state_dir()) if "node_id" in r}
    try:
        status = cluster_status(cfg, dashboard_url(cfg), gateway_url(cfg),
                                admin_key=environment().control_admin_key(), node_ports=ports)
    except ServeAdminError as err:
        print(f"costgate status: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"{status['app']}: {status['app_status']}, routing version {status['routing_version']}")
    print(_cache_line(cfg))
    for n in status["nodes"]:
        print(f"node {n['node_id'][:12]} {n['address']} {'alive' if n['alive'] else 'DEAD'}"
              f"{' head' if n['head'] else ''} ingress port {n['ingress_port']}")  # fmt: skip
    for r in status["replicas"]:
        led = r["ledger"] or {}
        print(f"replica {r['replica_id']} on {str(r['node_id'])[:12]} {r['state']}: ledger "
              f"{'healthy' if led.get('healthy') else 'unknown/unhealthy'}, "
              f"buffer {led.get('buffer_depth')}, spool {led.get('spool_depth')}")  # fmt: skip
    return 0
