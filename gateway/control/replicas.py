"""`costgate scale` and `costgate status`: the gateway's replicas, live, across nodes.

Scaling goes the declarative way, as a routing change does: GET what runs, change the
ingress deployment's `num_replicas` (or its `autoscaling_config` bounds) in that config,
PUT all of it back. Serve adds or drains replicas without touching the others (same
processes, same routing settings). `scaled_config` is the pure part.

Status joins three reads: Ray's nodes (state API), Serve's replicas (which node each
runs on), and each replica's ledger writer as the metrics hub last heard of it (the
gateway's `/costgate/replicas`, admin key), with the routing settings' version.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Mapping
from typing import Any

import httpx

from gateway.control.declarative import (
    RoutingUpdateError,
    application,
    declarative_config,
    ingress_deployment,
    ingress_replicas,
)
from gateway.control.serve_admin import ServeAdmin, ServeAdminError
from gateway.domain.config import Config

# Serve's own default when a config gives bounds and no target
TARGET_ONGOING_DEFAULT = 2


class ScaleError(RuntimeError):
    pass


def scaled_config(
    declarative: Mapping[str, Any],
    app_name: str,
    deployment: str,
    *,
    replicas: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    autoscaling: Mapping[str, Any] | None = None,
    max_per_node: int | None = None,
) -> dict[str, Any]:
    """A copy of the declarative config with the deployment's replica count (or its
    autoscaling bounds, and any other `autoscaling_config` keys) changed, nothing else.
    `max_per_node` (Serve's `max_replicas_per_node`) spreads them over nodes; changing it
    restarts the replicas one by one."""
    if replicas is None and min_replicas is None and max_replicas is None:
        raise ScaleError("give a replica count, or --min/--max")
    if replicas is not None and (min_replicas is not None or max_replicas is not None):
        raise ScaleError("a fixed replica count and autoscaling bounds exclude each other")
    if replicas is not None and replicas < 1:
        raise ScaleError("the replica count must be at least 1")
    out = copy.deepcopy(dict(declarative))
    apps = [a for a in out.get("applications") or [] if a.get("name") == app_name]
    if not apps:
        raise ScaleError(f"application {app_name!r} is not in the declarative config")
    deployments = apps[0].setdefault("deployments", [])
    found = [d for d in deployments if d.get("name") == deployment]
    d = found[0] if found else {"name": deployment}
    if not found:
        deployments.append(d)
    if max_per_node is not None:
        if max_per_node < 1:
            raise ScaleError("--max-per-node must be at least 1")
        d["max_replicas_per_node"] = max_per_node
    if replicas is not None:
        d.pop("autoscaling_config", None)
        d["num_replicas"] = replicas
        return out
    given = d.get("autoscaling_config")
    auto: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    current = d.get("num_replicas")
    fixed = current if isinstance(current, int) else None
    lo = min_replicas if min_replicas is not None else auto.get("min_replicas", fixed or 1)
    hi = max_replicas if max_replicas is not None else auto.get("max_replicas", max(lo, fixed or 1))
    if lo < 0 or hi < 1 or hi < lo:
        raise ScaleError(f"autoscaling bounds must be 0 <= min <= max, max >= 1 (got {lo}, {hi})")
    auto.update(autoscaling or {})
    auto.update(min_replicas=lo, max_replicas=hi)
    auto.setdefault("target_ongoing_requests", TARGET_ONGOING_DEFAULT)
    d.pop("num_replicas", None)
    d["autoscaling_config"] = auto
    return out


def scale(
    cfg: Config,
    dashboard_url: str,
    *,
    replicas: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    autoscaling: Mapping[str, Any] | None = None,
    max_per_node: int | None = None,
    timeout_s: float = 180.0,
) -> dict[str, Any]:
    """Change the count live and wait until Serve runs it; returns the deployment's
    target and running counts."""
    name = cfg.gateway.app_name
    with ServeAdmin(dashboard_url) as admin:
        try:
            instance = admin.instance(timeout_s=30)
            ingress = ingress_deployment(application(instance, name))
            body = scaled_config(
                declarative_config(instance), name, ingress, replicas=replicas,
                min_replicas=min_replicas, max_replicas=max_replicas, autoscaling=autoscaling,
                max_per_node=max_per_node,
            )  # fmt: skip
            admin.put(body, timeout_s=60)
        except (ServeAdminError, RoutingUpdateError) as err:
            raise ScaleError(str(err)) from None
        deadline = time.monotonic() + timeout_s
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                state = deployment_state(admin.instance(timeout_s=30), name, ingress)
            except ServeAdminError:
                time.sleep(1.0)
                continue
            lo = min_replicas if min_replicas is not None else replicas
            hi = max_replicas if max_replicas is not None else replicas
            running = state["running"]
            settled = state["target"] == running and not state["starting"]
            if settled and (lo is None or running >= lo) and (hi is None or running <= hi):
                return state
            time.sleep(1.0)
    raise ScaleError(f"the replicas did not settle within {timeout_s:.0f} s: {state}")


def deployment_state(instance: Mapping[str, Any], app_name: str, ingress: str) -> dict[str, Any]:
    d = ((application(instance, app_name).get("deployments") or {}).get(ingress)) or {}
    replicas = d.get("replicas") or []
    return {
        "deployment": ingress,
        "status": d.get("status"),
        "target": d.get("target_num_replicas"),
        "running": sum(1 for r in replicas if r.get("state") == "RUNNING"),
        "starting": sum(1 for r in replicas if r.get("state") in ("STARTING", "PENDING_MIGRATION")),
    }


def cluster_status(
    cfg: Config,
    dashboard_url: str,
    gateway_url: str,
    *,
    admin_key: str | None,
    node_ports: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """{"nodes": [...], "replicas": [...], "routing_version": ..., ...} as one JSON object."""
    name = cfg.gateway.app_name
    ports = dict(node_ports or {})
    with ServeAdmin(dashboard_url) as admin:
        nodes = admin.nodes(timeout_s=15)
        instance = admin.instance(timeout_s=30)
    app = (instance.get("applications") or {}).get(name) or {}
    out: dict[str, Any] = {
        "app": name,
        "app_status": app.get("status", "NOT_RUNNING"),
        "nodes": [
            {
                "node_id": n.get("node_id"),
                "address": n.get("node_ip"),
                "alive": n.get("state") == "ALIVE",
                "head": bool(n.get("is_head_node")),
                "ingress_port": cfg.gateway.port
                if n.get("is_head_node")
                else ports.get(str(n.get("node_id"))),
            }
            for n in nodes
        ],
        "replicas": [],
        "routing_version": None,
    }
    if not app:
        return out
    ingress = ingress_deployment(app)
    details = (app.get("deployments") or {}).get(ingress) or {}
    user_config = (details.get("deployment_config") or {}).get("user_config") or {}
    routing = user_config.get("routing") if isinstance(user_config, dict) else None
    out["routing_version"] = routing.get("version") if isinstance(routing, dict) else None
    out["deployment"] = deployment_state(instance, name, ingress)
    ledgers = _ledgers(gateway_url, admin_key)
    for r in details.get("replicas") or []:
        rid = r.get("replica_id")
        out["replicas"].append(
            {
                "replica_id": rid,
                "node_id": r.get("node_id"),
                "state": r.get("state"),
                "pid": r.get("pid"),
                "ledger": ledgers.get(str(rid)) if ledgers is not None else None,
            }
        )
    if ledgers is None:
        out["ledger_error"] = "no admin key, or the gateway did not answer /costgate/replicas"
    return out


def _ledgers(gateway_url: str, admin_key: str | None) -> dict[str, Any] | None:
    if not admin_key:
        return None
    try:
        resp = httpx.get(
            f"{gateway_url}/costgate/replicas",
            headers={"Authorization": f"Bearer {admin_key}"},
            timeout=10,
        )
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    body = resp.json().get("replicas")
    if not isinstance(body, dict):
        return None
    return {str(k): _writer_view(v) for k, v in body.items() if isinstance(v, dict)}


def _writer_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A replica's writer as status shows it: healthy, and the rows it holds."""
    return {
        "healthy": bool(row.get("alive", 0)),
        "buffer_depth": int(row.get("buffer_depth", 0)),
        "spool_depth": int(row.get("spool_depth", 0)),
        "dropped": int(row.get("dropped", 0)),
        "restarts": int(row.get("restarts", 0)),
        "reported_s_ago": row.get("age_s"),
    }


def running_replicas(cfg: Config, dashboard_url: str) -> set[str]:
    """The ids of the app's replicas that run now (none: not deployed, or no head)."""
    with ServeAdmin(dashboard_url) as admin, contextlib.suppress(ServeAdminError):
        replicas, _ = ingress_replicas(admin.instance(timeout_s=10), cfg.gateway.app_name)
        return {r for r, state in replicas.items() if state == "RUNNING"}
    return set()
