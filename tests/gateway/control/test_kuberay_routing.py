"""`routing.target: kuberay`: `costgate routing show|set` read and patch the RayService
through the Kubernetes API, audited as on Serve's path.

The API server is the fake of tests/fixtures/kube_api_server.py (a real HTTP server with
bearer auth and RFC 6902 patches, and a stand-in for KubeRay's reconcile); the RayService
is the one `costgate k8s-manifest` generates; the audit rows and the routing lock are in
the test PostgreSQL; the replica that confirms the change is the real gateway app.
"""

from __future__ import annotations

import copy
import os
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from db.keys import hash_key
from db.routing_audit import list_routing_changes
from gateway.cli.main import main
from gateway.control.change_audit import RoutingConflict
from gateway.control.declarative import RolloutFailed, RoutingUpdateError
from gateway.control.kuberay import rayservice
from gateway.control.routing_update import apply_routing_change, read_live_routing
from gateway.domain.config import Config, default_config_path, load_config
from gateway.domain.routing_target import KubeRayTarget, RoutingTarget
from gateway.replica.auth import Caller
from gateway.replica.key_scope import KeyScope
from tests.fixtures.kube_api_server import FakeKubeApi

pytestmark = pytest.mark.usefixtures("clean_ledger")

TOKEN = "sa-token-" + uuid.uuid4().hex
NAMESPACE = "costgate-prod"
NOWHERE = "http://127.0.0.1:1"  # the Ray dashboard: never asked on this target
NEW = {"deepseek-v3.2": Decimal(0), "gemini-2.5-flash": Decimal(25), "claude-sonnet-4.5": 75}


def manifest(cfg: Config, replicas: int | None = None) -> dict[str, Any]:
    doc = rayservice(
        cfg,
        name="costgate",
        image="costgate:test",
        config_map="costgate-config",
        ray_version="2.60.0",
        workers=(1, 1, 3),
    )
    doc["metadata"]["namespace"] = NAMESPACE
    if replicas is not None:
        sc = yaml.safe_load(doc["spec"]["serveConfigV2"])
        sc["applications"][0]["deployments"][0]["num_replicas"] = replicas
        doc["spec"]["serveConfigV2"] = yaml.safe_dump(sc, sort_keys=False)
    return doc


@pytest.fixture
def api() -> Iterator[FakeKubeApi]:
    fake = FakeKubeApi({TOKEN}, read_only_tokens={"viewer-token"}).start()
    yield fake
    fake.stop()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def on_kuberay(cfg: Config, api: FakeKubeApi, token_file: Path, **extra: Any) -> Config:
    target = KubeRayTarget(
        api_server=api.url,
        namespace=NAMESPACE,
        token_file=token_file,
        ca_file=token_file.parent / "no-ca.crt",
        **extra,
    )
    return cfg.model_copy(update={"routing": RoutingTarget(target="kuberay", kuberay=target)})


@pytest.fixture
def cfg() -> Config:
    return load_config(default_config_path())


def weights_in(api: FakeKubeApi) -> dict[str, Decimal]:
    sc = yaml.safe_load(api.get(NAMESPACE, "costgate")["spec"]["serveConfigV2"])
    routing = sc["applications"][0]["deployments"][0]["user_config"]["routing"]
    return {m: Decimal(str(w)) for m, w in routing["aliases"]["auto"].items()}


def change(kcfg: Config, database_url: str, **kw: Any) -> Any:
    return apply_routing_change(
        NOWHERE, "costgate", "auto", NEW, "ops:kim", "shift to claude", database_url,
        cfg=kcfg, **{"timeout_s": 10.0, **kw},
    )  # fmt: skip


def test_show_reads_the_routing_from_the_rayservice(cfg, api, token_file):
    api.put(manifest(cfg))
    live = read_live_routing(NOWHERE, "costgate", cfg=on_kuberay(cfg, api, token_file))
    assert live.settings.version == 1
    assert live.ingress == "Gateway"
    assert live.settings.aliases["auto"] == cfg.aliases["auto"].candidates
    assert [(m, code) for m, _, code in api.requests] == [("GET", 200)]


def test_set_patches_only_the_routing_with_a_compare_and_swap_and_audits_it(
    cfg, api, token_file, database_url
):
    api.put(manifest(cfg))
    before = api.get(NAMESPACE, "costgate")
    result = change(on_kuberay(cfg, api, token_file), database_url)

    assert (result.before.version, result.after.version) == (1, 2)
    assert weights_in(api) == NEW
    after = api.get(NAMESPACE, "costgate")
    assert after["metadata"]["generation"] == 2
    assert after["status"]["observedGeneration"] == 2
    # everything but the routing settings is as it was: nothing else restarts
    old_sc = yaml.safe_load(before["spec"]["serveConfigV2"])
    new_sc = yaml.safe_load(after["spec"]["serveConfigV2"])
    for sc in (old_sc, new_sc):
        sc["applications"][0]["deployments"][0]["user_config"].pop("routing")
    assert new_sc == old_sc
    assert after["spec"]["rayClusterConfig"] == before["spec"]["rayClusterConfig"]
    (row,) = list_routing_changes(database_url)
    assert (row.status, row.actor, row.alias) == ("applied", "ops:kim", "auto")
    assert (row.version_before, row.version_after) == (1, 2)
    assert row.after == {m: str(w) for m, w in NEW.items()}
    assert ("PATCH", 200) in [(m, code) for m, _, code in api.requests]


def test_a_change_made_in_between_refuses_the_patch_and_is_not_applied(
    cfg, api, token_file, database_url
):
    api.put(manifest(cfg))

    def kubectl_edit(obj: dict[str, Any]) -> None:
        sc = yaml.safe_load(obj["spec"]["serveConfigV2"])
        sc["applications"][0]["deployments"][0]["user_config"]["routing"]["aliases"]["auto"] = {
            "deepseek-v3.2": "100"
        }
        obj["spec"]["serveConfigV2"] = yaml.safe_dump(sc, sort_keys=False)

    api.before_next_patch = kubectl_edit
    with pytest.raises(RoutingConflict, match="changed while this change was being prepared"):
        change(on_kuberay(cfg, api, token_file), database_url)
    assert weights_in(api) == {"deepseek-v3.2": Decimal(100)}  # theirs, not ours
    assert ("PATCH", 422) in [(m, code) for m, _, code in api.requests]
    (row,) = list_routing_changes(database_url)
    assert row.status == "failed"


def test_a_wrong_token_is_refused_and_never_shown(cfg, api, token_file, database_url):
    api.put(manifest(cfg))
    token_file.write_text("not-the-token-" + uuid.uuid4().hex)
    wrong = token_file.read_text()
    with pytest.raises(RoutingUpdateError, match=r"refused our credentials \(HTTP 401") as info:
        change(on_kuberay(cfg, api, token_file), database_url)
    assert wrong not in str(info.value) and TOKEN not in str(info.value)
    assert list_routing_changes(database_url) == []  # refused at the read: nothing begun
    assert weights_in(api) == cfg.aliases["auto"].candidates


def test_a_token_that_may_read_but_not_patch_leaves_a_failed_row(
    cfg, api, token_file, database_url
):
    api.put(manifest(cfg))
    token_file.write_text("viewer-token")
    with pytest.raises(RoutingUpdateError, match=r"HTTP 403.*cannot patch") as info:
        change(on_kuberay(cfg, api, token_file), database_url)
    assert "get and patch on rayservices.ray.io" in str(info.value)
    (row,) = list_routing_changes(database_url)
    assert row.status == "failed"


def test_an_operator_that_never_reconciles_times_out(cfg, api, token_file, database_url):
    api.put(manifest(cfg))
    api.operator = "stalled"
    started = time.monotonic()
    with pytest.raises(RoutingUpdateError, match="did not report the change applied in time"):
        change(on_kuberay(cfg, api, token_file), database_url, timeout_s=1.5)
    assert time.monotonic() - started < 5
    assert weights_in(api) == NEW  # sent: the outcome is what is unknown
    (row,) = list_routing_changes(database_url)
    assert row.status == "timed_out"


def test_an_api_server_that_does_not_answer_the_patch_in_time_is_timed_out(
    cfg, api, token_file, database_url
):
    api.put(manifest(cfg))
    api.patch_delay_s = 2.0
    kcfg = on_kuberay(cfg, api, token_file, request_timeout_s=0.5)
    with pytest.raises(RoutingUpdateError, match="no answer in time"):
        change(kcfg, database_url)
    (row,) = list_routing_changes(database_url)
    assert row.status == "timed_out"


def test_a_deployment_kuberay_reports_failed_makes_the_row_failed(
    cfg, api, token_file, database_url
):
    api.put(manifest(cfg))
    api.operator = "failed"
    with pytest.raises(RolloutFailed, match="DEPLOY_FAILED"):
        change(on_kuberay(cfg, api, token_file), database_url)
    (row,) = list_routing_changes(database_url)
    assert row.status == "failed"


@pytest.fixture
def replica(plain_gateway, monkeypatch, tmp_path) -> Iterator[Any]:
    """The real gateway app as the RayService's one replica, with an admin key to ask it."""
    monkeypatch.setenv("COSTGATE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("COSTGATE_ADMIN_KEY", "cg-kuberay-admin")
    admin = Caller(app="ops", team=None, key_id=uuid.uuid4(), scope=KeyScope(admin=True))
    plain_gateway.service.keys.replace({hash_key("cg-kuberay-admin"): admin})
    original = copy.deepcopy(plain_gateway.service.routing.to_user_config())
    yield plain_gateway
    plain_gateway.service.apply_user_config(original)
    plain_gateway.service.keys.replace({})


def test_set_waits_until_the_replicas_report_the_new_version(
    replica, api, token_file, database_url
):
    cfg = replica.service.cfg
    api.put(manifest(cfg, replicas=1))
    api.operator_delay_s = 0.5

    def serve_reconfigures(serve_config: dict[str, Any]) -> None:
        # what Serve does with a submitted config: reconfigure() on the running replica
        replica.service.apply_user_config(
            serve_config["applications"][0]["deployments"][0]["user_config"]
        )

    api.on_reconcile = serve_reconfigures
    weights = {m: Decimal(1) for m in cfg.aliases["auto"].candidates}
    result = apply_routing_change(
        NOWHERE, cfg.gateway.app_name, "auto", weights, "ops:kim", None, database_url,
        cfg=on_kuberay(cfg, api, token_file), gateway_url=replica.base_url, timeout_s=15,
    )  # fmt: skip
    assert result.pids_after == (os.getpid(),)
    assert replica.service.routing.version == result.after.version == 2
    assert replica.service.routing.aliases["auto"] == weights
    assert result.elapsed_s >= 0.5  # it waited for the reconcile, not just the patch
    (row,) = list_routing_changes(database_url)
    assert row.status == "applied"


def test_the_cli_shows_and_sets_through_the_rayservice(
    cfg, api, token_file, database_url, tmp_path, capsys, monkeypatch
):
    api.put(manifest(cfg))
    data = yaml.safe_load(default_config_path().read_text())
    data["routing"] = {
        "target": "kuberay",
        "kuberay": {"api_server": api.url, "namespace": NAMESPACE, "token_file": str(token_file)},
    }
    path = tmp_path / "costgate.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("DATABASE_URL", database_url)

    assert main(["routing", "show", "--config", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "routing version 1" in shown and f"RayService {NAMESPACE}/costgate" in shown

    args = ["routing", "set", "auto", "deepseek-v3.2=0", "gemini-2.5-flash=0"]
    args += ["claude-sonnet-4.5=100", "--note", "incident 7", "--no-confirm-replicas"]
    assert main([*args, "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "version 1 → 2" in out
    assert weights_in(api)["claude-sonnet-4.5"] == 100
    assert main(["routing", "show", "--json", "--config", str(path)]) == 0
    assert '"version": 2' in capsys.readouterr().out
    (row,) = list_routing_changes(database_url)
    assert (row.status, row.note) == ("applied", "incident 7")
