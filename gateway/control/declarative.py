"""Serve's JSON, read and patched with no HTTP call: what runs, and the config that changes it.

Ray Serve reconfigures replicas in place (same processes, new `user_config` through
`reconfigure()`) only when a change arrives declaratively, and a PUT replaces the whole
config. So a routing change is a pure transformation: from what
`GET /api/serve/applications/` reports, the declarative config that redeploys exactly
that, with only the ingress deployment's `user_config` changed and the routing version
moved on by one. The same transformation on a KubeRay RayService's `serveConfigV2`
becomes a JSON patch (docs/kuberay.md). Kept apart from the HTTP calls so that the
update path (`gateway.control.routing_update`), `costgate up` (which keeps the live
weights across a redeploy) and the KubeRay patch share it, and tests run it on plain
dicts. The only I/O is reading the gateway's YAML config when the caller has none.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from gateway.domain.config import Config, ConfigError, default_config_path, load_config
from gateway.domain.routing_settings import RoutingError, RoutingSettings, parse_routing

# the top-level keys of Serve's declarative schema that the GET reports back
_TOP_LEVEL = ("proxy_location", "http_options", "grpc_options", "target_capacity")


class RoutingUpdateError(RuntimeError):
    """The change could not be read, sent or confirmed; the message says where it stopped."""


class RolloutFailed(RoutingUpdateError):
    """Serve says the deployment failed on the new config: the change did not take."""


@dataclasses.dataclass(frozen=True, slots=True)
class LiveRouting:
    """What is running now: the settings, and where they live in Serve's config."""

    settings: RoutingSettings
    app_name: str
    ingress: str  # the ingress deployment's name
    user_config: dict[str, Any] | None  # exactly as Serve holds it
    pids: tuple[int, ...]
    declarative: dict[str, Any]  # the whole config, ready to be PUT back
    cfg: Config


def declarative_config(instance: Mapping[str, Any]) -> dict[str, Any]:
    """The PUT body that redeploys exactly what runs now, every application included."""
    apps = instance.get("applications") or {}
    out: dict[str, Any] = {
        key: instance[key] for key in _TOP_LEVEL if instance.get(key) is not None
    }
    out["applications"] = []
    for name, app in apps.items():
        deployed = app.get("deployed_app_config")
        if not deployed:
            # an app deployed with serve.run has no declarative config to PUT back, and
            # leaving it out of the PUT would delete it
            raise RoutingUpdateError(
                f"application {name!r} was not deployed declaratively; "
                "redeploy it with a config (costgate up) before changing routing live"
            )
        out["applications"].append(copy.deepcopy(deployed))
    return out


def ingress_deployment(app: Mapping[str, Any]) -> str:
    """The name of an application's ingress deployment, which holds the routing settings."""
    topology = app.get("deployment_topology") or {}
    if topology.get("ingress_deployment"):
        return str(topology["ingress_deployment"])
    deployments = app.get("deployments") or {}
    holding = [
        name
        for name, d in deployments.items()
        if isinstance((d.get("deployment_config") or {}).get("user_config"), dict)
        and "routing" in d["deployment_config"]["user_config"]
    ]
    if len(holding) == 1:
        return str(holding[0])
    if len(deployments) == 1:
        return str(next(iter(deployments)))
    raise RoutingUpdateError(f"cannot tell the ingress deployment of {app.get('name')!r}")


def with_user_config(
    declarative: Mapping[str, Any], app_name: str, deployment: str, user_config: dict[str, Any]
) -> dict[str, Any]:
    """A copy of the declarative config with one deployment's user_config replaced."""
    out = copy.deepcopy(dict(declarative))
    for app in out["applications"]:
        if app.get("name") != app_name:
            continue
        deployments = app.setdefault("deployments", [])
        for d in deployments:
            if d.get("name") == deployment:
                d["user_config"] = user_config
                break
        else:
            # the config did not override any option of it yet
            deployments.append({"name": deployment, "user_config": user_config})
        return out
    raise RoutingUpdateError(f"application {app_name!r} is not in the declarative config")


def application(instance: Mapping[str, Any], app_name: str) -> dict[str, Any]:
    """One application's details from the GET, or an error naming the running ones."""
    apps = instance.get("applications") or {}
    if app_name not in apps:
        running = ", ".join(apps) or "none"
        raise RoutingUpdateError(
            f"no Serve application named {app_name!r} is running (running: {running})"
        )
    app: dict[str, Any] = apps[app_name]
    return app


def replica_pids(app: Mapping[str, Any], deployment: str) -> tuple[int, ...]:
    """The processes of a deployment's replicas: the same set after an in-place change."""
    replicas = (app.get("deployments") or {}).get(deployment, {}).get("replicas") or []
    return tuple(sorted(r["pid"] for r in replicas if r.get("pid") is not None))


def _config_for(app: Mapping[str, Any], cfg: Config | None) -> Config:
    """The static config the gateway runs with: the one it was deployed with when we can
    read it (its path is in the app's args), else the default."""
    if cfg is not None:
        return cfg
    args = (app.get("deployed_app_config") or {}).get("args") or {}
    path = args.get("config_path") if isinstance(args, dict) else None
    candidate = Path(path) if path else default_config_path()
    try:
        return load_config(candidate)
    except ConfigError as err:
        raise RoutingUpdateError(f"cannot load the gateway's configuration: {err}") from None


def live_routing(instance: Mapping[str, Any], app_name: str, cfg: Config | None) -> LiveRouting:
    """The routing settings `app_name` runs, validated against its static config."""
    app = application(instance, app_name)
    ingress = ingress_deployment(app)
    details = (app.get("deployments") or {}).get(ingress) or {}
    user_config = (details.get("deployment_config") or {}).get("user_config")
    if user_config is None:
        for d in (app.get("deployed_app_config") or {}).get("deployments") or []:
            if d.get("name") == ingress:
                user_config = d.get("user_config")
    static = _config_for(app, cfg)
    try:
        settings = parse_routing(user_config, static)
    except RoutingError as err:
        raise RoutingUpdateError(f"the running routing settings do not validate: {err}") from None
    return LiveRouting(
        settings=settings,
        app_name=app_name,
        ingress=ingress,
        user_config=copy.deepcopy(user_config),
        pids=replica_pids(app, ingress),
        declarative=declarative_config(instance),
        cfg=static,
    )


def rollout_state(
    instance: Mapping[str, Any], app_name: str, ingress: str, user_config: Mapping[str, Any]
) -> tuple[bool, str]:
    """(done, what we are waiting for): the deployment runs `user_config` on every replica.

    Serve marks the deployment UPDATING from the moment its target changes until every
    replica has run `reconfigure()` with it, then HEALTHY again.
    """
    app = application(instance, app_name)
    d = (app.get("deployments") or {}).get(ingress)
    if d is None:
        return False, f"deployment {ingress!r} not listed yet"
    if (d.get("deployment_config") or {}).get("user_config") != user_config:
        return False, "the controller has not taken the new config yet"
    status = d.get("status")
    if status in ("DEPLOY_FAILED", "UNHEALTHY"):
        raise RolloutFailed(
            f"deployment {ingress!r} is {status} after the change: {d.get('message', '')[:500]}"
        )
    if status != "HEALTHY" or app.get("status") != "RUNNING":
        return False, f"deployment {status}, application {app.get('status')}"
    replicas = d.get("replicas") or []
    if len(replicas) < d.get("target_num_replicas", 0) or any(
        r.get("state") != "RUNNING" for r in replicas
    ):
        return False, "replicas still starting"
    return True, "healthy on the new config"


def next_version(
    proposed: RoutingSettings, current: RoutingSettings, cfg: Config
) -> RoutingSettings:
    """`proposed` as the version after `current`, validated exactly as a replica will."""
    after = proposed.model_copy(update={"version": current.version + 1})
    # the replicas will run exactly this through parse_routing: run it here first
    return parse_routing(after.to_user_config(), cfg)


# --- KubeRay: the same change on a RayService's serveConfigV2 ---------------------------


def serve_config_live(serve_config: Mapping[str, Any], app_name: str, cfg: Config) -> LiveRouting:
    """The routing settings in a declarative Serve config (a RayService's
    `serveConfigV2`): held by the one deployment whose `user_config` has `routing`.
    A config names no processes, so `pids` is empty."""
    apps = [a for a in serve_config.get("applications") or [] if a.get("name") == app_name]
    if not apps:
        raise RoutingUpdateError(f"application {app_name!r} is not in the Serve config")
    holding = [
        d
        for d in apps[0].get("deployments") or []
        if isinstance(d.get("user_config"), dict) and "routing" in d["user_config"]
    ]
    if len(holding) != 1:
        raise RoutingUpdateError(
            f"expected one deployment of {app_name!r} with routing in its user_config, "
            f"found {len(holding)}"
        )
    deployment = holding[0]
    try:
        settings = parse_routing(deployment["user_config"], cfg)
    except RoutingError as err:
        raise RoutingUpdateError(f"the current routing settings do not validate: {err}") from None
    return LiveRouting(
        settings=settings,
        app_name=app_name,
        ingress=str(deployment["name"]),
        user_config=copy.deepcopy(deployment["user_config"]),
        pids=(),
        declarative=copy.deepcopy(dict(serve_config)),
        cfg=cfg,
    )


def configured_replicas(serve_config: Mapping[str, Any], app_name: str, deployment: str) -> int:
    """How many replicas a declarative config asks of a deployment (the autoscaler's
    floor when it scales): how many must confirm a change when no PIDs are known."""
    for app in serve_config.get("applications") or []:
        if app.get("name") != app_name:
            continue
        for d in app.get("deployments") or []:
            if d.get("name") != deployment:
                continue
            auto = d.get("autoscaling_config")
            if isinstance(auto, dict):
                return max(1, int(auto.get("min_replicas") or 1))
            if isinstance(d.get("num_replicas"), int):
                return max(1, int(d["num_replicas"]))
    return 1


def serve_config_change(
    serve_config: Mapping[str, Any],
    app_name: str,
    change: Callable[[RoutingSettings, Config], RoutingSettings],
    cfg: Config,
) -> tuple[dict[str, Any], RoutingSettings, RoutingSettings]:
    """Apply `change` to a declarative Serve config (a RayService's `serveConfigV2`).

    Returns (new config, settings before, settings after).
    """
    live = serve_config_live(serve_config, app_name, cfg)
    after = next_version(change(live.settings, cfg), live.settings, cfg)
    user_config = {**(live.user_config or {}), **after.to_user_config()}
    new = with_user_config(serve_config, app_name, live.ingress, user_config)
    return new, live.settings, after


def rayservice_rollout_state(
    rayservice: Mapping[str, Any], generation: int, app_name: str, ingress: str
) -> tuple[bool, str]:
    """(done, what we are waiting for): KubeRay has reconciled the RayService's
    `generation` (the patch's) and reports the ingress deployment HEALTHY on it.

    KubeRay sets `status.observedGeneration` at the end of a reconcile, after it has
    submitted a changed `serveConfigV2` to the cluster; the application statuses it copies
    from Serve in the same pass may still predate Serve's UPDATING, which is why the
    replicas' own reports (`replica_confirm`) are the confirmation when the gateway's URL
    is known.
    """
    status = rayservice.get("status") or {}
    observed = status.get("observedGeneration") or 0
    if observed < generation:
        return False, f"KubeRay has reconciled generation {observed}, not yet {generation}"
    apps = (status.get("activeServiceStatus") or {}).get("applicationStatuses") or {}
    app = apps.get(app_name)
    if app is None:
        return False, f"KubeRay reports no application {app_name!r} yet"
    d = (app.get("serveDeploymentStatuses") or {}).get(ingress) or {}
    for what, state in (("application", app.get("status")), ("deployment", d.get("status"))):
        if state in ("DEPLOY_FAILED", "UNHEALTHY"):
            message = str(d.get("message") or app.get("message") or "")[:500]
            raise RolloutFailed(f"KubeRay reports the {what} {state} after the change: {message}")
    if app.get("status") != "RUNNING" or d.get("status") != "HEALTHY":
        return False, f"application {app.get('status')}, deployment {d.get('status')}"
    return True, "KubeRay reports it healthy on the new generation"


def rayservice_json_patch(old_text: str, new_config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch (RFC 6902) for `kubectl patch rayservice NAME --type json`.

    Its `test` operation makes the patch compare-and-swap: the API server refuses it if
    `serveConfigV2` changed since it was read, as RoutingConflict does on the REST path.
    """
    return [
        {"op": "test", "path": "/spec/serveConfigV2", "value": old_text},
        {
            "op": "replace",
            "path": "/spec/serveConfigV2",
            "value": yaml.safe_dump(dict(new_config), sort_keys=False),
        },
    ]


def ingress_replicas(instance: Mapping[str, Any], app_name: str) -> tuple[dict[str, str], int]:
    """The app's replicas as Serve reports them (id -> state: RUNNING, STARTING, STOPPING...)
    and the count its deployment aims at (0: not deployed)."""
    app = (instance.get("applications") or {}).get(app_name) or {}
    for deployment in (app.get("deployments") or {}).values():
        replicas = {str(r.get("replica_id")): str(r.get("state"))
                    for r in deployment.get("replicas") or ()}  # fmt: skip
        return replicas, int(deployment.get("target_num_replicas") or 0)
    return {}, 0
