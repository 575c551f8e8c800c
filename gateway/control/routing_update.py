"""The one update path for live routing: `costgate routing show|set` and the dashboard.

Ray Serve reconfigures replicas in place (same processes, new `user_config` through
`reconfigure()`) only when the change arrives declaratively, so a change goes:

1. GET the running declarative config from the Ray dashboard's REST API
   (`gateway.control.serve_admin`, with Ray's auth token when it has one);
2. build the new routing settings, validate them with `parse_routing` against the
   static config (a `reconfigure()` that raises gets the replica replaced, and its
   successor fails the same way), with the version moved on by one;
3. under the app's routing lock, write the audit row as `pending` (who, when, before,
   after, note, the version it replaces and the one it makes), read the live settings
   again and go on only if they are still the ones the change was built on;
4. PUT back every application, with only the ingress deployment's `user_config`
   changed (the PUT replaces the whole config: an application left out is deleted);
5. wait until the deployment is healthy on the new `user_config` and, when the
   gateway's URL is known, until every replica's `GET /costgate/routing` reports the
   new version;
6. settle the audit row: `applied`, `failed` or `timed_out`.

Steps 2 and 3 are pure, in `gateway.control.declarative`; this module makes the calls,
polls and audits, so that every change, from the CLI or the dashboard, is sent,
confirmed and recorded the same way. With `routing.target: kuberay` the same change is
a compare-and-swap patch of the RayService's `serveConfigV2` through the Kubernetes API
(`gateway.control.kuberay_routing`, docs/kuberay.md), so the operator keeps it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from gateway.control import change_audit, kuberay_routing
from gateway.control.change_audit import RoutingConflict
from gateway.control.declarative import (
    LiveRouting,
    RoutingUpdateError,
    application,
    live_routing,
    next_version,
    replica_pids,
    rollout_state,
    with_user_config,
)
from gateway.control.replica_confirm import RoutingChangeResult
from gateway.control.replica_confirm import wait_replicas_report as _wait_replicas_report
from gateway.control.serve_admin import ServeAdmin, ServeAdminError
from gateway.domain.config import Config, ConfigError, default_config_path, load_config
from gateway.domain.routing_settings import RoutingSettings, check_weights
from gateway.domain.routing_target import KubeRayTarget, effective_target


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
    """What runs now and where it lives: `costgate routing show` prints it."""
    kuberay = _kuberay(cfg)
    if kuberay is not None:
        return kuberay_routing.read_live(kuberay[0], app_name, kuberay[1])
    with _serve(dashboard_url, admin) as serve:
        return live_routing(serve.instance(), app_name, cfg)


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
    """Apply `change(current settings, static config)` to the running app, as a
    compare-and-swap on the settings version, audited from intent to outcome.

    Any change goes through here (weights, policy knobs, caps, breaker settings): it is
    validated, versioned, rolled out, confirmed and audited the same way:

    - a change that does not validate raises RoutingError: nothing is written or sent;
    - the app's routing lock (`db.routing_audit.routing_change_lock`, a PostgreSQL
      advisory lock on the app name) is held from before the `pending` row is written
      until its outcome is, so costgate's writers (CLI, dashboard, any host) never
      interleave their read, check and PUT; one that waits longer than `timeout_s` for it
      is refused with RoutingConflict and leaves a `failed` row;
    - nothing is sent unless the `pending` row is in the database (no unaudited change);
    - under the lock the live settings are read again: if they are no longer the ones
      the change was built on (`version_before`), another writer came first; the row
      becomes `failed`, RoutingConflict is raised and nothing is sent. The lock orders
      costgate's writers only; this re-read also catches a `serve deploy` from outside
      that landed before it (Serve's REST API has no conditional PUT to close the rest);
    - a PUT Serve refuses makes the row `failed`, a deployment Serve reports failed on
      the new config too; a PUT that got no answer, or a rollout not confirmed in
      `timeout_s` (or cut short), makes it `timed_out`: sent, outcome unknown;
    - confirmed on every replica: `applied`.

    With `routing.target: kuberay` the same change patches the RayService instead
    (`gateway.control.kuberay_routing`), with the same validation, audit and outcomes.
    """
    kuberay = _kuberay(cfg)
    if kuberay is not None:
        return kuberay_routing.apply_settings(
            kuberay[0],
            app_name,
            change,
            cfg=kuberay[1],
            actor=actor,
            note=note,
            database_url=database_url,
            audit_alias=audit_alias,
            gateway_url=gateway_url,
            timeout_s=timeout_s,
        )
    with _serve(dashboard_url, admin) as serve:
        live = live_routing(serve.instance(), app_name, cfg)
        proposed = change(live.settings, live.cfg)
        after = next_version(proposed, live.settings, live.cfg)
        new_user_config = {**(live.user_config or {}), **after.to_user_config()}
        body = with_user_config(live.declarative, app_name, live.ingress, new_user_config)
        intent = change_audit.intent(actor, app_name, audit_alias, note, live.settings, after)

        with change_audit.locked(database_url, intent, timeout_s) as audit:
            audit_id = change_audit.begin(audit, intent)
            with change_audit.settled_on_failure(audit, audit_id) as progress:
                latest = live_routing(serve.instance(), app_name, live.cfg)
                if latest.user_config != live.user_config:
                    raise RoutingConflict(
                        f"routing of {app_name!r} changed while this change was being "
                        f"prepared (now version {latest.settings.version}, this change was "
                        f"made for {live.settings.version}); read it again and retry"
                    )
                progress.phase = "put"
                started = time.monotonic()
                serve.put(body)
                progress.phase = "rollout"
                pids_after = _wait_rolled_out(
                    serve,
                    app_name,
                    live.ingress,
                    new_user_config,
                    after.version,
                    gateway_url,
                    timeout_s,
                )
                elapsed = time.monotonic() - started
            change_audit.settle_applied(audit, audit_id, after.version)
        return RoutingChangeResult(
            before=live.settings,
            after=after,
            audit_id=audit_id,
            pids_before=live.pids,
            pids_after=pids_after,
            elapsed_s=elapsed,
        )


def uses_kuberay(cfg: Config | None) -> bool:
    """Whether a change goes to a KubeRay RayService (config or environment say so)."""
    return _kuberay(cfg) is not None


def _kuberay(cfg: Config | None) -> tuple[KubeRayTarget, Config] | None:
    """The KubeRay target when the config (or the environment) picks it, else None."""
    if cfg is None:
        if os.environ.get("COSTGATE_ROUTING_TARGET") != "kuberay":
            return None
        try:
            cfg = load_config(default_config_path())
        except ConfigError as err:
            raise RoutingUpdateError(f"cannot load the gateway's configuration: {err}") from None
    try:
        target = effective_target(cfg.routing, os.environ)
    except ValueError as err:
        raise RoutingUpdateError(str(err)) from None
    return (target.kuberay, cfg) if target.target == "kuberay" else None


@contextlib.contextmanager
def _serve(dashboard_url: str, admin: ServeAdmin | None) -> Iterator[ServeAdmin]:
    """`admin`, or a client of our own closed afterwards; a failed call as our error."""
    own = admin is None
    serve = admin or ServeAdmin(dashboard_url)
    try:
        yield serve
    except ServeAdminError as err:
        raise RoutingUpdateError(str(err)) from None
    finally:
        if own:
            serve.close()


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
    if gateway_url is not None:
        # the replicas' own reports are the proof, and they come as soon as each has run
        # `reconfigure()`; Serve's status, read with the running PIDs (at the start and
        # once a second), only stops the wait early when the rollout failed. Waiting for
        # its HEALTHY flag first cost a REST read per 0.1 s and about a second per change.
        def reported() -> set[int]:
            instance = admin.instance()
            rollout_state(instance, app_name, ingress, user_config)  # raises if it failed
            return set(replica_pids(application(instance, app_name), ingress))

        return tuple(sorted(_wait_replicas_report(gateway_url, reported, version, deadline)))
    waiting = "nothing yet"
    while time.monotonic() < deadline:
        instance = admin.instance()
        done, waiting = rollout_state(instance, app_name, ingress, user_config)
        if done:
            return replica_pids(application(instance, app_name), ingress)
        time.sleep(0.1)
    raise RoutingUpdateError(
        f"the change was sent, but not every replica confirmed it within {timeout_s:.0f} s "
        f"(last seen: {waiting})"
    )
