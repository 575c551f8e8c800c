"""`routing.target: kuberay` on a real Ray Serve gateway (2 replicas, the sim, PostgreSQL).

What KubeRay's operator does with a RayService, the fake API server's reconcile does
here with the real cluster: it PUTs the RayService's `serveConfigV2` to the Ray
dashboard (every application, as KubeRay does) and copies Serve's own statuses into
the RayService's `status`. So the change is patched into the RayService, reaches Serve
only through the "operator", and is confirmed by the real replicas.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from db.routing_audit import list_routing_changes
from gateway.control.declarative import application, declarative_config, replica_pids
from gateway.control.routing_update import apply_routing_change, read_live_routing
from gateway.control.serve_admin import ServeAdmin
from gateway.domain.config import Config
from gateway.domain.routing_target import KubeRayTarget, RoutingTarget
from tests.fixtures.kube_api_server import FakeKubeApi
from tests.fixtures.live_gateway import BYSTANDER, RoutingGateway

pytestmark = pytest.mark.ray

TOKEN = "sa-" + uuid.uuid4().hex


def kuberay_statuses(instance: dict[str, Any]) -> dict[str, Any]:
    """Serve's application statuses as KubeRay writes them into a RayService."""
    return {
        name: {
            "status": app.get("status"),
            "serveDeploymentStatuses": {
                d: {"status": details.get("status"), "message": details.get("message", "")}
                for d, details in (app.get("deployments") or {}).items()
            },
        }
        for name, app in (instance.get("applications") or {}).items()
    }


@pytest.fixture
def operated(routing_gateway: RoutingGateway, tmp_path) -> Iterator[tuple[FakeKubeApi, Config]]:
    gw = routing_gateway
    admin = ServeAdmin(gw.dashboard_url)
    api = FakeKubeApi({TOKEN}).start()
    api.on_reconcile = admin.put  # the operator submits the whole config to Serve
    api.serve_status = lambda: kuberay_statuses(admin.instance())
    api.operator_delay_s = 0.2
    serve_config = declarative_config(admin.instance())
    # created, and reconciled once as the operator does at creation
    api.put(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "costgate", "namespace": "costgate"},
            "spec": {"serveConfigV2": yaml.safe_dump(serve_config, sort_keys=False)},
        },
    )
    token = tmp_path / "token"
    token.write_text(TOKEN)
    target = KubeRayTarget(
        api_server=api.url, namespace="costgate", token_file=token, ca_file=tmp_path / "none"
    )
    cfg = gw.cfg.model_copy(update={"routing": RoutingTarget(target="kuberay", kuberay=target)})
    try:
        yield api, cfg
    finally:
        api.stop()
        admin.close()


def test_a_change_patched_into_the_rayservice_reaches_every_replica_in_place(
    routing_gateway, operated
):
    gw = routing_gateway
    api, cfg = operated
    with ServeAdmin(gw.dashboard_url) as admin:
        pids_before = replica_pids(application(admin.instance(), gw.app_name), "Gateway")
    live = read_live_routing("http://127.0.0.1:1", gw.app_name, cfg=cfg)
    weights = {m: "0" for m in gw.cfg.aliases["auto"].candidates}
    weights[sorted(weights)[0]] = "100"
    started = time.monotonic()
    result = apply_routing_change(
        "http://127.0.0.1:1",  # the Ray dashboard is the operator's to call, not ours
        gw.app_name,
        "auto",
        weights,
        "ops:kim",
        "kuberay live",
        gw.database_url,
        cfg=cfg,
        gateway_url=gw.base_url,
        timeout_s=60,
    )
    assert result.after.version == live.settings.version + 1
    # confirmed by both replicas themselves, which are the ones that ran before
    assert len(result.pids_after) == gw.cfg.gateway.num_replicas
    assert set(result.pids_after) == set(pids_before)
    with ServeAdmin(gw.dashboard_url) as admin:
        instance = admin.instance()
    running = application(instance, gw.app_name)["deployments"]["Gateway"]
    routing = running["deployment_config"]["user_config"]["routing"]
    assert routing["version"] == result.after.version
    assert BYSTANDER in instance["applications"]  # the whole config went back
    patched = yaml.safe_load(api.get("costgate", "costgate")["spec"]["serveConfigV2"])
    assert {a["name"] for a in patched["applications"]} == {gw.app_name, BYSTANDER}
    rows = [r for r in list_routing_changes(gw.database_url) if r.note == "kuberay live"]
    assert [r.status for r in rows] == ["applied"]
    print(f"kuberay: patch to both replicas confirmed in {time.monotonic() - started:.2f} s")
