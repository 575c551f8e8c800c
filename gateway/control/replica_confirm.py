"""What a routing change reports, and the replicas' own confirmation of it.

Shared by both targets of the update path (Serve's REST API in
`gateway.control.routing_update`, a KubeRay RayService in
`gateway.control.kuberay_routing`): whoever sent the change, it is done when the
replicas themselves answer `GET /costgate/routing` with the new version.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable

import httpx

from gateway.control.declarative import RoutingUpdateError
from gateway.domain.routing_settings import RoutingSettings

GATEWAY_ROUTING_PATH = "/costgate/routing"


@dataclasses.dataclass(frozen=True, slots=True)
class RoutingChangeResult:
    before: RoutingSettings
    after: RoutingSettings
    audit_id: int | None
    pids_before: tuple[int, ...]  # the ingress replicas' processes before the change
    pids_after: tuple[int, ...]  # ... and after: the same set when it was done in place
    elapsed_s: float  # from the PUT (or patch) to every replica confirmed

    @property
    def in_place(self) -> bool:
        return set(self.pids_before) == set(self.pids_after)


def wait_replicas_report(
    gateway_url: str,
    running: Callable[[], set[int]] | int,
    version: int,
    deadline: float,
) -> set[int]:
    """Ask the gateway until every running replica has answered with `version` or later;
    return the PIDs that did.

    `running` gives the running replicas' PIDs (Serve's controller knows them), or is how
    many distinct replicas must answer when only the count is known (a RayService's
    status names no PIDs).

    Serve's proxy spreads requests over replicas, so a few dozen requests reach all of
    them; this confirms what the controller's status says from the replicas' own mouths.
    The set of running replicas is read again every second: an autoscaler may add one
    (it starts on the new config) or take one away (it would never answer).
    The endpoint wants an admin key: COSTGATE_ADMIN_KEY, else the one `costgate up` keeps
    under the state dir.
    """
    from gateway.domain.environment import environment

    env = environment()
    admin_key = env.control_admin_key()
    headers = {"authorization": f"Bearer {admin_key}"} if admin_key else {}
    confirmed: set[int] = set()
    url = gateway_url.rstrip("/") + GATEWAY_ROUTING_PATH

    def expected() -> set[int] | int:
        return running if isinstance(running, int) else running()

    pids = expected()
    refreshed = time.monotonic()
    with httpx.Client(timeout=5.0, headers=headers) as client:
        while time.monotonic() < deadline:
            if time.monotonic() - refreshed >= 1.0:
                pids, refreshed = expected(), time.monotonic()
            try:
                resp = client.get(url)
                body = resp.json() if resp.is_success else {}
            except (httpx.HTTPError, json.JSONDecodeError):
                body = {}
            else:
                if resp.status_code in (401, 403):
                    # no key or not an admin one: waiting would not change the answer
                    raise RoutingUpdateError(
                        f"the change was applied, but {url} refused to confirm it "
                        f"({resp.status_code}): it needs an admin gateway key in "
                        f"COSTGATE_ADMIN_KEY or {env.admin_key_file} (`costgate up` writes one)"
                    )
            pid = body.get("pid")
            seen = (body.get("routing") or {}).get("version")
            if isinstance(pid, int) and isinstance(seen, int) and seen >= version:
                confirmed.add(pid)
                if isinstance(pids, int):
                    if len(confirmed) >= pids:
                        return confirmed
                elif pids <= confirmed:
                    return pids
            else:
                time.sleep(0.05)
    if isinstance(pids, int):
        detail = f"only {len(confirmed)} of {pids} replicas reported"
    else:
        detail = f"replicas with PIDs {sorted(pids - confirmed)} did not report"
    raise RoutingUpdateError(
        f"the change was applied, but {detail} routing version {version} at {url} in time"
    )
