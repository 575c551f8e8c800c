"""The one update path for live routing: `costgate routing show|set` and the dashboard.

Ray Serve reconfigures replicas in place (same processes, new `user_config` through
`reconfigure()`) only when the change arrives declaratively, so a change goes:

1. GET the running declarative config from the Ray dashboard's REST API
   (`/api/serve/applications/`, with Ray's auth token when it has one);
2. build the new routing settings, validate them with `parse_routing` against the
   static config (a `reconfigure()` that raises gets the replica replaced, and its
   successor fails the same way), with the version moved on by one;
3. PUT back every application, with only the ingress deployment's `user_config`
   changed (the PUT replaces the whole config: an application left out is deleted);
4. wait until the deployment is healthy on the new `user_config` and, when the
   gateway's URL is known, until every replica's `GET /costgate/routing` reports the
   new version;
5. append the audit row (who, when, before, after, note).

On KubeRay the same change is a patch of the RayService's `serveConfigV2`: see
docs/kuberay.md.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateway.control.cluster import dashboard_headers
from gateway.domain.config import Config, ConfigError, default_config_path, load_config
from gateway.domain.routing_settings import (
    RoutingError,
    RoutingSettings,
    check_weights,
    parse_routing,
)

APPLICATIONS_PATH = "/api/serve/applications/"
GATEWAY_ROUTING_PATH = "/costgate/routing"
# the top-level keys of Serve's declarative schema that the GET reports back
_TOP_LEVEL = ("proxy_location", "http_options", "grpc_options", "target_capacity")


class RoutingUpdateError(RuntimeError):
    """The change could not be read, sent or confirmed; the message says where it stopped."""


class RoutingConflict(RoutingUpdateError):
    """Someone else changed the routing between our read and our write: read again."""


@dataclasses.dataclass(frozen=True, slots=True)
class RoutingChangeResult:
    before: RoutingSettings
    after: RoutingSettings
    audit_id: int | None
    pids_before: tuple[int, ...]  # the ingress replicas' processes before the change
    pids_after: tuple[int, ...]  # ... and after: the same set when it was done in place
    elapsed_s: float  # from the PUT to every replica confirmed

    @property
    def in_place(self) -> bool:
        return set(self.pids_before) == set(self.pids_after)


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


class ServeAdmin:
    """The Ray dashboard's Serve REST API: the same calls `serve deploy` and KubeRay make."""

    def __init__(
        self,
        dashboard_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self._client = httpx.Client(
            base_url=dashboard_url.rstrip("/"),
            headers=dict(headers if headers is not None else dashboard_headers()),
            transport=transport,
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ServeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def instance(self) -> dict[str, Any]:
        try:
            resp = self._client.get(APPLICATIONS_PATH)
        except httpx.HTTPError as err:
            raise RoutingUpdateError(
                f"cannot reach the Ray dashboard at {self._client.base_url}: {err}"
            ) from None
        _raise_for(resp, "reading the Serve applications")
        body: dict[str, Any] = resp.json()
        return body

    def put(self, config: dict[str, Any]) -> None:
        try:
            resp = self._client.put(APPLICATIONS_PATH, json=config)
        except httpx.HTTPError as err:
            raise RoutingUpdateError(f"sending the new Serve config failed: {err}") from None
        _raise_for(resp, "sending the new Serve config")


def _raise_for(resp: httpx.Response, doing: str) -> None:
    if resp.status_code in (401, 403):
        raise RoutingUpdateError(
            f"{doing}: the Ray dashboard refused our credentials (HTTP {resp.status_code}); "
            "set RAY_AUTH_TOKEN or check ~/.ray/auth_token"
        )
    if not resp.is_success:
        raise RoutingUpdateError(f"{doing}: HTTP {resp.status_code}: {resp.text[:500]}")


# --- pure parts: reading and patching Serve's JSON --------------------------------------


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


def _app(instance: Mapping[str, Any], app_name: str) -> dict[str, Any]:
    apps = instance.get("applications") or {}
    if app_name not in apps:
        running = ", ".join(apps) or "none"
        raise RoutingUpdateError(
            f"no Serve application named {app_name!r} is running (running: {running})"
        )
    app: dict[str, Any] = apps[app_name]
    return app


def _replica_pids(app: Mapping[str, Any], deployment: str) -> tuple[int, ...]:
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
    app = _app(instance, app_name)
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
        pids=_replica_pids(app, ingress),
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
    app = _app(instance, app_name)
    d = (app.get("deployments") or {}).get(ingress)
    if d is None:
        return False, f"deployment {ingress!r} not listed yet"
    if (d.get("deployment_config") or {}).get("user_config") != user_config:
        return False, "the controller has not taken the new config yet"
    status = d.get("status")
    if status in ("DEPLOY_FAILED", "UNHEALTHY"):
        raise RoutingUpdateError(
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


# --- KubeRay: the same change on a RayService's serveConfigV2 ---------------------------


def serve_config_change(
    serve_config: Mapping[str, Any],
    app_name: str,
    change: Callable[[RoutingSettings, Config], RoutingSettings],
    cfg: Config,
) -> tuple[dict[str, Any], RoutingSettings, RoutingSettings]:
    """Apply `change` to a declarative Serve config (a RayService's `serveConfigV2`).

    Returns (new config, settings before, settings after). The deployment that holds
    the routing settings is the one whose `user_config` has a `routing` key.
    """
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
        before = parse_routing(deployment["user_config"], cfg)
    except RoutingError as err:
        raise RoutingUpdateError(f"the current routing settings do not validate: {err}") from None
    after = next_version(change(before, cfg), before, cfg)
    user_config = {**deployment["user_config"], **after.to_user_config()}
    return with_user_config(serve_config, app_name, deployment["name"], user_config), before, after


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


# --- I/O: the update itself -------------------------------------------------------------


def read_routing(
    dashboard_url: str,
    app_name: str,
    *,
    cfg: Config | None = None,
    admin: ServeAdmin | None = None,
) -> RoutingSettings:
    """The routing settings the running app uses now."""
    return read_live_routing(dashboard_url, app_name, cfg=cfg, admin=admin).settings


def read_live_routing(
    dashboard_url: str,
    app_name: str,
    *,
    cfg: Config | None = None,
    admin: ServeAdmin | None = None,
) -> LiveRouting:
    own = admin is None
    admin = admin or ServeAdmin(dashboard_url)
    try:
        return live_routing(admin.instance(), app_name, cfg)
    finally:
        if own:
            admin.close()


def apply_routing_change(
    dashboard_url: str,
    app_name: str,
    alias: str,
    new_weights: Mapping[str, Decimal | int | str],
    actor: str,
    note: str | None,
    database_url: str | None,
    *,
    cfg: Config | None = None,
    gateway_url: str | None = None,
    timeout_s: float = 60.0,
    admin: ServeAdmin | None = None,
) -> RoutingChangeResult:
    """Set one alias's weights on every replica, and audit it.

    `database_url` None means the default database (DATABASE_URL, else the embedded one).
    Raises RoutingError for weights that must not be applied (nothing is sent then),
    RoutingUpdateError when the cluster cannot be read, updated or confirmed.
    """
    weights = {m: Decimal(str(w)) for m, w in new_weights.items()}

    def change(current: RoutingSettings, static: Config) -> RoutingSettings:
        check_weights(alias, weights, static)
        return current.with_weights(alias, weights)

    return apply_routing_settings(
        dashboard_url,
        app_name,
        change,
        actor=actor,
        note=note,
        database_url=database_url,
        audit_alias=alias,
        cfg=cfg,
        gateway_url=gateway_url,
        timeout_s=timeout_s,
        admin=admin,
    )


def apply_routing_settings(
    dashboard_url: str,
    app_name: str,
    change: Callable[[RoutingSettings, Config], RoutingSettings],
    *,
    actor: str,
    note: str | None,
    database_url: str | None,
    audit_alias: str | None = None,
    cfg: Config | None = None,
    gateway_url: str | None = None,
    timeout_s: float = 60.0,
    admin: ServeAdmin | None = None,
) -> RoutingChangeResult:
    """Apply `change(current settings, static config)` to the running app.

    Any change goes through here (weights, policy knobs, caps, breaker settings): it is
    validated, versioned, rolled out, confirmed and audited the same way.
    """
    own = admin is None
    admin = admin or ServeAdmin(dashboard_url)
    try:
        live = live_routing(admin.instance(), app_name, cfg)
        proposed = change(live.settings, live.cfg)
        after = next_version(proposed, live.settings, live.cfg)
        new_user_config = {**(live.user_config or {}), **after.to_user_config()}
        body = with_user_config(live.declarative, app_name, live.ingress, new_user_config)

        # a last look: another writer between our read and now would be overwritten
        latest = live_routing(admin.instance(), app_name, live.cfg)
        if latest.user_config != live.user_config:
            raise RoutingConflict(
                f"routing of {app_name!r} changed while this change was being prepared "
                f"(now version {latest.settings.version}); read it again and retry"
            )

        started = time.monotonic()
        admin.put(body)
        pids_after = _wait_rolled_out(
            admin, app_name, live.ingress, new_user_config, after.version, gateway_url, timeout_s
        )
        elapsed = time.monotonic() - started
        audit_id = _audit(database_url, actor, app_name, audit_alias, live.settings, after, note)
        return RoutingChangeResult(
            before=live.settings,
            after=after,
            audit_id=audit_id,
            pids_before=live.pids,
            pids_after=pids_after,
            elapsed_s=elapsed,
        )
    finally:
        if own:
            admin.close()


def next_version(
    proposed: RoutingSettings, current: RoutingSettings, cfg: Config
) -> RoutingSettings:
    """`proposed` as the version after `current`, validated exactly as a replica will."""
    after = proposed.model_copy(update={"version": current.version + 1})
    # the replicas will run exactly this through parse_routing: run it here first
    return parse_routing(after.to_user_config(), cfg)


def _wait_rolled_out(
    admin: ServeAdmin,
    app_name: str,
    ingress: str,
    user_config: Mapping[str, Any],
    version: int,
    gateway_url: str | None,
    timeout_s: float,
) -> tuple[int, ...]:
    deadline = time.monotonic() + timeout_s
    waiting = "nothing yet"
    while time.monotonic() < deadline:
        instance = admin.instance()
        done, waiting = rollout_state(instance, app_name, ingress, user_config)
        if done:
            pids = _replica_pids(_app(instance, app_name), ingress)
            if gateway_url is None:
                return pids

            def running() -> set[int]:
                return set(_replica_pids(_app(admin.instance(), app_name), ingress))

            return tuple(sorted(_wait_replicas_report(gateway_url, running, version, deadline)))
        time.sleep(0.1)
    raise RoutingUpdateError(
        f"the change was sent, but not every replica confirmed it within {timeout_s:.0f} s "
        f"(last seen: {waiting})"
    )


def _wait_replicas_report(
    gateway_url: str, running: Callable[[], set[int]], version: int, deadline: float
) -> set[int]:
    """Ask the gateway until every running replica (by PID) has answered with `version` or
    later; return their PIDs.

    Serve's proxy spreads requests over replicas, so a few dozen requests reach all of
    them; this confirms what the controller's status says from the replicas' own mouths.
    The set of running replicas is read again every second: an autoscaler may add one
    (it starts on the new config) or take one away (it would never answer).
    """
    confirmed: set[int] = set()
    url = gateway_url.rstrip("/") + GATEWAY_ROUTING_PATH
    pids = running()
    refreshed = time.monotonic()
    with httpx.Client(timeout=5.0) as client:
        while time.monotonic() < deadline:
            if time.monotonic() - refreshed >= 1.0:
                pids, refreshed = running(), time.monotonic()
            try:
                resp = client.get(url)
                body = resp.json() if resp.is_success else {}
            except (httpx.HTTPError, json.JSONDecodeError):
                body = {}
            pid = body.get("pid")
            seen = (body.get("routing") or {}).get("version")
            if isinstance(pid, int) and isinstance(seen, int) and seen >= version:
                confirmed.add(pid)
                if pids <= confirmed:
                    return pids
            else:
                time.sleep(0.05)
    missing = sorted(pids - confirmed)
    raise RoutingUpdateError(
        f"the change was applied, but replicas with PIDs {missing} did not report "
        f"routing version {version} at {url} in time"
    )


def _audit(
    database_url: str | None,
    actor: str,
    app_name: str,
    alias: str | None,
    before: RoutingSettings,
    after: RoutingSettings,
    note: str | None,
) -> int:
    from db.routing_audit import record_routing_change

    if alias is not None:
        # the alias's weights, model -> exact decimal string: what "before → after" shows
        old: Any = _weights_json(before, alias)
        new: Any = _weights_json(after, alias)
    else:
        old, new = before.model_dump(mode="json"), after.model_dump(mode="json")
    try:
        return record_routing_change(database_url, actor, app_name, alias, old, new, note)
    except Exception as err:  # noqa: BLE001 - any database failure: say what was applied
        raise RoutingUpdateError(
            f"routing version {after.version} is live on every replica, but the audit row "
            f"could not be written: {type(err).__name__}: {str(err)[:300]}"
        ) from err


def _weights_json(settings: RoutingSettings, alias: str) -> dict[str, str] | None:
    weights = settings.aliases.get(alias)
    return None if weights is None else {m: str(w) for m, w in weights.items()}
