"""The update path's KubeRay target (`routing.target: kuberay`): a live routing change is a
compare-and-swap patch of the RayService's `serveConfigV2`, so the operator keeps it.

KubeRay's operator owns the Serve config of the clusters it runs: a PUT to the Ray
dashboard would work until the operator submits the RayService's `serveConfigV2` again
(an operator restart, a new RayCluster). So `costgate routing show|set` and the
dashboard's editor, through `gateway.control.routing_update`, do here what they do
against Serve, on the RayService:

1. GET the RayService from the Kubernetes API and read `spec.serveConfigV2`;
2. build and validate the change with the pure functions Serve's path uses, version + 1;
3. under the app's routing lock, write the audit row `pending`;
4. PATCH the RayService with `application/json-patch+json`: a `test` op carrying the
   `serveConfigV2` we read, then the `replace`. The API server applies both or neither,
   so a change made by anyone (costgate, kubectl, Argo) since our GET refuses the patch
   (422, or 409), and that is RoutingConflict: read again and retry;
5. wait until the RayService's status says KubeRay reconciled the patched generation
   and Serve reports the deployment HEALTHY and, when the gateway's URL is known, until
   as many replicas as the config asks for report the new version;
6. settle the audit row: `applied`, `failed` or `timed_out`, as on Serve's path.

Who may change routing is Kubernetes RBAC's to say: get and patch on the RayService.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from gateway.control import change_audit
from gateway.control.change_audit import RoutingConflict
from gateway.control.declarative import (
    LiveRouting,
    RoutingUpdateError,
    configured_replicas,
    next_version,
    rayservice_json_patch,
    rayservice_rollout_state,
    serve_config_live,
    with_user_config,
)
from gateway.control.kube_api import KubeApi, KubeApiError, kube_api
from gateway.control.replica_confirm import RoutingChangeResult, wait_replicas_report
from gateway.domain.config import Config
from gateway.domain.routing_settings import RoutingSettings
from gateway.domain.routing_target import KubeRayTarget


def serve_config_text(rayservice: dict[str, Any]) -> str:
    text = (rayservice.get("spec") or {}).get("serveConfigV2")
    if not isinstance(text, str) or not text.strip():
        name = (rayservice.get("metadata") or {}).get("name")
        raise RoutingUpdateError(f"RayService {name!r} has no spec.serveConfigV2 to change")
    return text


def _parse(text: str) -> dict[str, Any]:
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise RoutingUpdateError(
            f"serveConfigV2 of the RayService is not valid YAML: {err}"
        ) from None
    if not isinstance(parsed, dict):
        raise RoutingUpdateError("the RayService's serveConfigV2 is not a mapping")
    return parsed


def read_live(
    target: KubeRayTarget, app_name: str, cfg: Config, *, api: KubeApi | None = None
) -> LiveRouting:
    """What the RayService holds now: `costgate routing show` on KubeRay."""
    with _api(target, api) as kube:
        rayservice = kube.get_rayservice(target.rayservice)
    return serve_config_live(_parse(serve_config_text(rayservice)), app_name, cfg)


def apply_settings(
    target: KubeRayTarget,
    app_name: str,
    change: Callable[[RoutingSettings, Config], RoutingSettings],
    *,
    cfg: Config,
    actor: str,
    note: str | None,
    database_url: str | None,
    audit_alias: str | None = None,
    gateway_url: str | None = None,
    timeout_s: float = 60.0,
    api: KubeApi | None = None,
) -> RoutingChangeResult:
    """Apply `change(current settings, static config)` by patching the RayService, as a
    compare-and-swap on its `serveConfigV2`, audited from intent to outcome (the rules of
    `routing_update.apply_routing_settings`, with the patch as the write)."""
    name = target.rayservice
    with _api(target, api) as kube:
        old_text = serve_config_text(kube.get_rayservice(name))
        serve_config = _parse(old_text)
        live = serve_config_live(serve_config, app_name, cfg)
        after = next_version(change(live.settings, cfg), live.settings, cfg)
        user_config = {**(live.user_config or {}), **after.to_user_config()}
        new_config = with_user_config(serve_config, app_name, live.ingress, user_config)
        patch = rayservice_json_patch(old_text, new_config)
        new_text = str(patch[-1]["value"])
        intent = change_audit.intent(actor, app_name, audit_alias, note, live.settings, after)
        replicas = configured_replicas(new_config, app_name, live.ingress)

        with change_audit.locked(database_url, intent, timeout_s) as audit:
            audit_id = change_audit.begin(audit, intent)
            with change_audit.settled_on_failure(audit, audit_id) as progress:
                progress.phase = "put"
                started = time.monotonic()
                deadline = started + timeout_s
                patched = _patch(kube, name, patch, old_text)
                generation = int((patched.get("metadata") or {}).get("generation") or 0)
                progress.phase = "rollout"
                _wait_reconciled(kube, name, generation, new_text, app_name, live.ingress, deadline)
                pids: set[int] = set()
                if gateway_url is not None:
                    pids = wait_replicas_report(gateway_url, replicas, after.version, deadline)
                elapsed = time.monotonic() - started
            change_audit.settle_applied(audit, audit_id, after.version)
    return RoutingChangeResult(
        before=live.settings,
        after=after,
        audit_id=audit_id,
        pids_before=(),
        pids_after=tuple(sorted(pids)),
        elapsed_s=elapsed,
    )


def _patch(kube: KubeApi, name: str, patch: list[dict[str, Any]], old_text: str) -> dict[str, Any]:
    try:
        return kube.patch_rayservice(name, patch)
    except KubeApiError as err:
        if err.status_code not in (409, 422):
            raise
        # a failed `test` op is a 422, as is a patch the schema refuses: which one it was,
        # the RayService itself says
        try:
            now = serve_config_text(kube.get_rayservice(name))
        except RoutingUpdateError:
            now = None
        if err.status_code == 409 or now != old_text:
            raise RoutingConflict(
                f"RayService {name!r} changed while this change was being prepared (its "
                "serveConfigV2 is no longer the one it was made for); nothing was applied: "
                "read it again and retry"
            ) from None
        raise


def _wait_reconciled(
    kube: KubeApi,
    name: str,
    generation: int,
    new_text: str,
    app_name: str,
    ingress: str,
    deadline: float,
) -> None:
    waiting = "nothing yet"
    while time.monotonic() < deadline:
        rayservice = kube.get_rayservice(name)
        if serve_config_text(rayservice) != new_text:
            raise RoutingUpdateError(
                f"RayService {name!r} was changed again while this change rolled out; "
                "`costgate routing show` says what runs now"
            )
        done, waiting = rayservice_rollout_state(rayservice, generation, app_name, ingress)
        if done:
            return
        time.sleep(0.2)
    raise RoutingUpdateError(
        f"the RayService was patched, but KubeRay did not report the change applied in time "
        f"(last seen: {waiting})"
    )


@contextlib.contextmanager
def _api(target: KubeRayTarget, api: KubeApi | None) -> Iterator[KubeApi]:
    if api is not None:
        yield api
        return
    with kube_api(target) as own:
        yield own
