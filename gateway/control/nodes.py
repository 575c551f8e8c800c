"""`costgate join` / `costgate leave`: worker nodes of the head that `costgate up` started.

A worker is a `ray start --address=HEAD` of our own, in token mode with the head's token
(a worker that cannot show it is refused by the GCS), under a temp dir and on ports of
its own, so that a second node can run on the head's machine (tests, a demo) and `leave`
stops exactly its processes: as for the head, every process inherits CLUSTER_MARKER_ENV
set to the node's temp dir, and never Ray's own stop command, which kills every Ray on
the host. Serve (`proxy_location: EveryNode`) starts an ingress on every node; the
node's ingress port is RAY_SERVE_WORKER_PROXY_HTTP_PORT, read by Serve's proxy (and by
its HAProxy manager) on non-head nodes only.

Each node joined from this state dir is recorded in `<state dir>/nodes/<name>.json`
(its temp dir, ports and Ray node id): `leave` and `status` read it, and `down` stops
what is left of them after the head.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gateway.control.cluster import ClusterError, ClusterPaths, haproxy_site_path
from gateway.control.ray_processes import CLUSTER_MARKER_ENV, cluster_processes, stop_processes
from gateway.control.serve_admin import ServeAdmin, ServeAdminError
from gateway.control.serve_config import RAY_BACKGROUND_FLAGS, ray_node_env
from gateway.domain.config import Config
from gateway.domain.ray_options import REPLICA_PORTS

NODES_DIR = "nodes"
# `ray start` for a worker on loopback (the head's machine): the head runs with
# RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 so that Ray keeps 127.0.0.1 rather than resolve it
# to the host's outward address; with that setting `ray start` refuses worker nodes,
# and without it the worker would bind the outward address and dial the head there. So
# this one process passes the refusal and keeps every address on loopback; the node's
# own processes run with the setting, as the head's do.
LOOPBACK_RAY_START = """
import sys
import ray._private.ray_constants as constants
import ray._private.services as services
from ray._common.network_utils import get_localhost_ip
constants.ENABLE_RAY_CLUSTER = True
services.get_node_ip_address = lambda address=None: get_localhost_ip()
from ray.scripts.scripts import main
sys.argv[0] = "ray"
sys.exit(main())
"""
LOOPBACK = ("127.0.0.1", "localhost")
# a worker's object store: Ray's default is 30% of the RAM per node, twice on one host
OBJECT_STORE_BYTES = 200 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """Where one worker node lives and listens."""

    name: str
    head_address: str
    node_ip: str
    temp_dir: Path
    http_port: int  # its Serve ingress: what a load balancer points at
    metrics_export_port: int
    haproxy_dir: Path
    haproxy_ports: tuple[int, int, int, int]  # stats, metrics, fallback http, fallback grpc
    replica_ports: tuple[int, int]
    num_cpus: int | None = None

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "head_address": self.head_address,
            "node_ip": self.node_ip,
            "temp_dir": str(self.temp_dir),
            "http_port": self.http_port,
            "haproxy_dir": str(self.haproxy_dir),
        }


def nodes_dir(state_dir: Path) -> Path:
    return state_dir / NODES_DIR


def node_records(state_dir: Path) -> list[dict[str, Any]]:
    """Every node joined from this state dir and not left yet."""
    out = []
    for path in sorted(nodes_dir(state_dir).glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            out.append(json.loads(path.read_text()))
    return out


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def plan_node(
    cfg: Config,
    state_dir: Path,
    head_address: str,
    *,
    node_ip: str = "127.0.0.1",
    http_port: int | None = None,
    num_cpus: int | None = None,
) -> NodePlan:
    """A node's temp dir and ports: the config's gateway port where it is free (a node on a
    machine of its own), else free ones (a second node on the head's machine)."""
    index = len(node_records(state_dir)) + 1
    name = f"node{index}-{free_port()}"
    # random, kept in the node's record: nobody else on the machine can predict the
    # node's folders in /tmp and lay a folder or a link there first
    digest = secrets.token_hex(5)
    if http_port is None:
        wanted = cfg.gateway.port
        http_port = wanted if port_free(wanted, node_ip) else free_port(node_ip)
    first, _ = cfg.gateway.ray.replica_ports()
    # the next ranges up from the head's, wrapping inside 30000-32749 (ray_options)
    start = 30000 + (first - 30000 + index * REPLICA_PORTS) % (55 * REPLICA_PORTS)
    return NodePlan(
        name=name,
        head_address=head_address,
        node_ip=node_ip,
        temp_dir=Path("/tmp") / f"costgate-ray-{digest}",
        http_port=http_port,
        metrics_export_port=free_port(),
        haproxy_dir=Path("/tmp") / f"cgh-{digest}",
        haproxy_ports=(free_port(), free_port(), free_port(), free_port()),
        replica_ports=(start, start + REPLICA_PORTS - 1),
        num_cpus=num_cpus,
    )


def join_env(env: dict[str, str], state_dir: Path) -> dict[str, str]:
    """Token mode with the head's token: given in the environment, or the state dir's file
    (the head's own machine). Never a new token: it would only be refused."""
    if env.get("RAY_AUTH_TOKEN", "").strip():
        return {"RAY_AUTH_MODE": "token"}
    named = env.get("RAY_AUTH_TOKEN_PATH", "").strip()
    path = Path(named).expanduser() if named else ClusterPaths(state_dir).token_file
    if not path.is_file() or not path.read_text().strip():
        raise ClusterError(
            f"no Ray token at {path}: set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the "
            "head's token (in the head's state dir, ray/auth_token)"
        )
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}


def ray_cli(loopback: bool) -> list[str]:
    """The command that runs Ray's CLI (on loopback: through LOOPBACK_RAY_START)."""
    if loopback:
        return [sys.executable, "-c", LOOPBACK_RAY_START]
    return [str(Path(sys.executable).with_name("ray"))]


def ray_start_worker(cfg: Config, plan: NodePlan, env: dict[str, str]) -> None:
    loopback = plan.node_ip in LOOPBACK
    cmd = [
        *ray_cli(loopback),
        "start",
        f"--address={plan.head_address}",
        f"--node-ip-address={plan.node_ip}",
        f"--temp-dir={plan.temp_dir}",
        "--dashboard-agent-listen-port=0",
        f"--metrics-export-port={plan.metrics_export_port}",
        # random worker ports: the head's range (20000-29999) may be on this machine
        "--min-worker-port=0",
        "--max-worker-port=0",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--disable-usage-stats",
        *RAY_BACKGROUND_FLAGS,
    ]
    if plan.num_cpus:
        cmd.append(f"--num-cpus={plan.num_cpus}")
    stats, metrics, fallback_http, fallback_grpc = plan.haproxy_ports
    plan.haproxy_dir.mkdir(parents=True, exist_ok=True)
    plan.haproxy_dir.chmod(0o700)
    h = plan.haproxy_dir
    env = {
        **env,
        CLUSTER_MARKER_ENV: str(plan.temp_dir),
        "RAY_worker_niceness": "0",
        "RAY_SERVE_WORKER_PROXY_HTTP_PORT": str(plan.http_port),
        "RAY_SERVE_WORKER_PROXY_GRPC_PORT": str(free_port()),
        # HAProxy's files and ports are machine-wide by default: this node's own
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(plan.replica_ports[0]),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(plan.replica_ports[1]),
        "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": str(fallback_http),
        "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT": str(fallback_grpc),
        "RAY_SERVE_HAPROXY_STATS_PORT": str(stats),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(metrics),
        "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": str(h / "haproxy.cfg"),
        "RAY_SERVE_HAPROXY_SOCKET_PATH": str(h / "admin.sock"),
        "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": str(h),
        "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": str(h / "server-state"),
        "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": str(h / "metrics.sock"),
    }
    if loopback:
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    for name, value in ray_node_env(cfg).items():
        env.setdefault(name, value)  # as on the head: an operator's own setting wins
    if cfg.gateway.ingress == "haproxy":
        env["PYTHONPATH"] = haproxy_site_path(env.get("PYTHONPATH"))
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise ClusterError(f"ray start (worker) failed:\n{tail}")


def join(
    cfg: Config,
    state_dir: Path,
    plan: NodePlan,
    env: dict[str, str],
    dashboard_url: str,
    *,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """Start the node, wait until the head lists it alive and Serve's ingress answers on it."""
    auth = join_env(env, state_dir)
    with ServeAdmin(dashboard_url) as admin:
        before = {n["node_id"] for n in _alive(admin)}
        ray_start_worker(cfg, plan, {**env, **auth})
        record = plan.record()
        nodes_dir(state_dir).mkdir(parents=True, exist_ok=True)
        path = nodes_dir(state_dir) / f"{plan.name}.json"
        path.write_text(json.dumps(record))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            new = [n for n in _alive(admin) if n["node_id"] not in before]
            if new:
                record["node_id"] = new[0]["node_id"]
                path.write_text(json.dumps(record))
                return record
            time.sleep(1.0)
    raise ClusterError(f"the head at {plan.head_address} did not list the new node")


def _alive(admin: ServeAdmin) -> list[dict[str, Any]]:
    try:
        return [n for n in admin.nodes(timeout_s=10) if n.get("state") == "ALIVE"]
    except ServeAdminError as err:
        raise ClusterError(str(err)) from None


def serve_replicas_on(admin: ServeAdmin, node_id: str) -> int:
    """Serve replicas (of any application) on `node_id` in any state: on a draining node
    they are PENDING_MIGRATION until their replacements run, then STOPPING."""
    apps = admin.instance(timeout_s=10).get("applications") or {}
    return sum(
        1
        for app in apps.values()
        for d in (app.get("deployments") or {}).values()
        for r in d.get("replicas") or []
        if r.get("node_id") == node_id
    )


def drain_node(head_address: str, node_id: str, env: dict[str, str], deadline_s: int) -> None:
    """Ask the GCS to drain the node: Serve starts replacements elsewhere and stops the
    node's replicas (drained gracefully: they flush their ledger on the way out)."""
    loopback = head_address.rsplit(":", 1)[0] in LOOPBACK
    if loopback:
        env = {**env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    cmd = [
        *ray_cli(loopback), "drain-node",
        f"--address={head_address}", f"--node-id={node_id}",
        "--reason=DRAIN_NODE_REASON_PREEMPTION", "--reason-message=costgate leave",
        f"--deadline-remaining-seconds={deadline_s}",
    ]  # fmt: skip
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-8:])
        raise ClusterError(f"ray drain-node failed:\n{tail}")


def leave(
    record: dict[str, Any],
    state_dir: Path,
    env: dict[str, str],
    dashboard_url: str,
    *,
    drain_timeout_s: float,
) -> tuple[bool, int]:
    """Drain the node, then stop its processes; (drained in time, processes stopped)."""
    node_id = record.get("node_id")
    drained = True
    if node_id:
        auth = join_env(env, state_dir)
        with ServeAdmin(dashboard_url) as admin:
            try:
                drain_node(record["head_address"], node_id, {**env, **auth},
                           int(drain_timeout_s))  # fmt: skip
                deadline = time.monotonic() + drain_timeout_s
                while serve_replicas_on(admin, node_id):
                    if time.monotonic() > deadline:
                        drained = False
                        break
                    time.sleep(1.0)
            except (ServeAdminError, ClusterError):
                drained = False  # the head is gone: nothing to drain to
    stopped = stop_node(record)
    (nodes_dir(state_dir) / f"{record['name']}.json").unlink(missing_ok=True)
    return drained, stopped


def stop_node(record: dict[str, Any]) -> int:
    """Stop the node's processes (only those under its temp dir)."""
    n = stop_processes(Path(record["temp_dir"])).count
    if record.get("haproxy_dir"):
        shutil.rmtree(record["haproxy_dir"], ignore_errors=True)
    return n


def node_pids(record: dict[str, Any]) -> list[int]:
    return sorted(p.pid for p in cluster_processes(Path(record["temp_dir"])))
