import argparse
from pathlib import Path

import pytest
import yaml

from gateway.cli import deploy as cli_deploy
from gateway.control.kuberay import CONFIG_PATH, STATE_DIR, manifests, render
from gateway.control.serve_config import config_digest, serve_config
from gateway.domain.config import load_config
from gateway.domain.environment import secret_problems
from tests.deploy.repo_files import CONTAINER_CONFIG, K8S, ROOT, yaml_docs

GENERATED = K8S / "costgate.yaml"


def _generate(tmp_path: Path, *extra: str) -> Path:
    parser = argparse.ArgumentParser()
    cli_deploy.register(parser.add_subparsers())
    out = tmp_path / "out.yaml"
    args = parser.parse_args(
        ["k8s-manifest", "--config", str(CONTAINER_CONFIG), "-o", str(out), *extra]
    )
    assert args.func(args) == 0
    return out


def _by_kind(docs: list[dict]) -> dict[str, dict]:
    return {d["kind"]: d for d in docs}


def test_serve_config_v2_is_what_costgate_up_deploys_with_pod_paths():
    cfg = load_config(CONTAINER_CONFIG)
    service = _by_kind(manifests(cfg, CONTAINER_CONFIG.read_text()))["RayService"]
    in_cluster = yaml.safe_load(service["spec"]["serveConfigV2"])
    up = serve_config(cfg, config_path=CONFIG_PATH, state_dir=STATE_DIR)
    assert in_cluster["applications"][0]["deployments"] == up["applications"][0]["deployments"]
    assert in_cluster["applications"][0]["import_path"] == up["applications"][0]["import_path"]
    assert in_cluster["applications"][0]["args"] == {
        "config_path": "/etc/costgate/costgate.yaml",
        "state_dir": "/var/lib/costgate",
        # a changed ConfigMap changes the digest: the RayService then replaces replicas
        "config_digest": config_digest(cfg),
    }
    assert in_cluster["proxy_location"] == "EveryNode"
    assert in_cluster["http_options"]["host"] == "0.0.0.0"


def test_routing_weights_in_the_manifest_follow_the_config_file(tmp_path):
    data = yaml.safe_load(CONTAINER_CONFIG.read_text())
    data["aliases"]["auto"]["candidates"] = {"deepseek-v3.2": 0, "claude-sonnet-4.5": 100}
    changed = tmp_path / "costgate.yaml"
    changed.write_text(yaml.safe_dump(data))
    cfg = load_config(changed)
    service = _by_kind(manifests(cfg, changed.read_text()))["RayService"]
    deployment = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]["deployments"][
        0
    ]
    weights = deployment["user_config"]["routing"]["aliases"]["auto"]
    assert {k: float(v) for k, v in weights.items()} == {
        "deepseek-v3.2": 0.0,
        "claude-sonnet-4.5": 100.0,
    }


def test_the_config_map_carries_the_config_file_itself():
    cfg = load_config(CONTAINER_CONFIG)
    cm = _by_kind(manifests(cfg, CONTAINER_CONFIG.read_text()))["ConfigMap"]
    assert cm["data"]["costgate.yaml"] == CONTAINER_CONFIG.read_text()


def test_the_committed_manifest_is_up_to_date(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = _generate(tmp_path)
    assert out.read_text() == GENERATED.read_text(), (
        "regenerate: costgate k8s-manifest --config deploy/config/costgate.yaml "
        "-o deploy/k8s/costgate.yaml"
    )


def test_pods_get_every_provider_key_from_the_secret_and_none_inline():
    cfg = load_config(CONTAINER_CONFIG)
    docs = manifests(cfg, CONTAINER_CONFIG.read_text())
    text = render(docs, "x")
    head = _by_kind(docs)["RayService"]["spec"]["rayClusterConfig"]["headGroupSpec"]
    env = {e["name"]: e for e in head["template"]["spec"]["containers"][0]["env"]}
    for provider in cfg.providers:
        ref = env[provider.api_key_env]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == "costgate-secrets"
    assert "postgresql://" not in text


def test_every_secret_key_the_manifests_read_is_in_the_secret_example():
    secret = yaml_docs(K8S / "secret.example.yaml")[0]
    keys = set(secret["stringData"])
    for path in sorted(K8S.glob("*.yaml")):
        for ref in _secret_refs(yaml_docs(path)):
            assert ref["name"] == secret["metadata"]["name"], path
            assert ref["key"] in keys, (path.name, ref["key"])


def _secret_refs(node: object) -> list[dict]:
    found = []
    if isinstance(node, dict):
        if "secretKeyRef" in node:
            found.append(node["secretKeyRef"])
        for v in node.values():
            found += _secret_refs(v)
    elif isinstance(node, list):
        for v in node:
            found += _secret_refs(v)
    return found


def test_the_pod_monitor_scrapes_one_head_pod_on_the_serve_port():
    service = _by_kind(yaml_docs(GENERATED))["RayService"]
    head = service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]
    monitors = {d["metadata"]["name"]: d for d in yaml_docs(K8S / "podmonitor.yaml")}
    costgate = monitors["costgate"]["spec"]
    selector = dict(costgate["selector"]["matchLabels"])
    # KubeRay labels head pods with ray.io/node-type; the rest are ours
    assert selector.pop("ray.io/node-type") == "head"
    assert selector.items() <= head["metadata"]["labels"].items()
    (endpoint,) = costgate["podMetricsEndpoints"]
    ports = {p["name"]: p["containerPort"] for p in head["spec"]["containers"][0]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert ports[endpoint["port"]] == 8000
    # the pods bind beyond loopback: the scrape sends the token the pods read
    token = endpoint["authorization"]["credentials"]
    env = {e["name"]: e for e in head["spec"]["containers"][0]["env"]}
    assert env[token["key"]]["valueFrom"]["secretKeyRef"]["name"] == token["name"]
    secret = _by_kind(yaml_docs(K8S / "secret.example.yaml"))["Secret"]
    assert token["key"] in secret["stringData"]


def test_the_dashboard_reaches_the_services_kuberay_creates():
    service = _by_kind(yaml_docs(GENERATED))["RayService"]
    name = service["metadata"]["name"]
    deployment = _by_kind(yaml_docs(K8S / "dashboard.yaml"))["Deployment"]
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["COSTGATE_RAY_DASHBOARD_URL"] == f"http://{name}-head-svc:8265"
    assert env["COSTGATE_GATEWAY_URL"] == f"http://{name}-serve-svc:8000"
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert (
        volumes[0]["configMap"]["name"]
        == _by_kind(yaml_docs(GENERATED))["ConfigMap"]["metadata"]["name"]
    )


def test_services_select_the_pods_of_their_deployments():
    for path in (K8S / "dashboard.yaml", K8S / "sim.yaml"):
        kinds = _by_kind(yaml_docs(path))
        pod_labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
        assert kinds["Deployment"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        assert kinds["Service"]["spec"]["selector"].items() <= pod_labels.items()


def test_the_sim_service_is_the_host_the_config_names():
    cfg = load_config(CONTAINER_CONFIG)
    sim = _by_kind(yaml_docs(K8S / "sim.yaml"))["Service"]
    port = sim["spec"]["ports"][0]["port"]
    for provider in cfg.providers:
        assert provider.base_url.startswith(f"http://{sim['metadata']['name']}:{port}/")


def test_bad_worker_counts_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        _generate(tmp_path, "--workers", "5:1:3")
    with pytest.raises(SystemExit):
        _generate(tmp_path, "--workers", "two")


def test_serve_autoscaling_in_the_config_turns_on_kuberay_autoscaling(tmp_path):
    data = yaml.safe_load(CONTAINER_CONFIG.read_text())
    data["gateway"]["autoscaling"] = {"min_replicas": 2, "max_replicas": 6}
    path = tmp_path / "costgate.yaml"
    path.write_text(yaml.safe_dump(data))
    service = _by_kind(manifests(load_config(path), path.read_text()))["RayService"]
    assert service["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] is True
    deployment = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]["deployments"][
        0
    ]
    assert deployment["autoscaling_config"]["max_replicas"] == 6
    assert "num_replicas" not in deployment


def test_k8s_manifest_and_the_migration_job_are_commands_costgate_accepts():
    from gateway.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["k8s-manifest", "--config", str(CONTAINER_CONFIG)])
    assert args.func is cli_deploy.cmd_k8s_manifest
    job = _by_kind(yaml_docs(GENERATED))["Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert callable(parser.parse_args(container["args"]).func)


def _ray_containers(service: dict) -> list[dict]:
    cluster = service["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def test_ray_runs_with_token_auth_from_the_secret_on_every_ray_container():
    service = _by_kind(yaml_docs(GENERATED))["RayService"]
    cluster = service["spec"]["rayClusterConfig"]
    # KubeRay 1.6+: token mode, and the operator's own calls use our Secret's token
    assert cluster["authOptions"] == {"mode": "token", "secretName": "costgate-secrets"}
    # KubeRay's minimum for token auth is Ray 2.52
    major, minor = (int(x) for x in cluster["rayVersion"].split(".")[:2])
    assert (major, minor) >= (2, 52)
    token_ref = {"secretKeyRef": {"name": "costgate-secrets", "key": "auth_token"}}
    containers = _ray_containers(service)
    assert len(containers) >= 2
    for container in containers:
        env = {e["name"]: e for e in container["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token", container["name"]
        # not optional: a Ray pod without the token must not start
        assert env["RAY_AUTH_TOKEN"]["valueFrom"] == token_ref, container["name"]
    # the dashboard's routing editor calls Ray's dashboard with the same token
    dashboard = _by_kind(yaml_docs(K8S / "dashboard.yaml"))["Deployment"]
    (editor,) = dashboard["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in editor["env"]}
    assert env["RAY_AUTH_TOKEN"]["valueFrom"] == token_ref
    # and the Secret's example holds a placeholder that costgate refuses
    secret = yaml_docs(K8S / "secret.example.yaml")[0]
    problems = secret_problems(secret["stringData"], ["auth_token"])
    assert problems and "placeholder" in problems[0]


def _selects(selector: dict, labels: dict) -> bool:
    # only matchLabels is used by our manifests; anything else would need a real evaluator
    assert set(selector) <= {"matchLabels"}, selector
    return selector.get("matchLabels", {}).items() <= labels.items()


def _admits(policy: dict, source: dict, same_namespace: bool, port: int) -> bool:
    """NetworkPolicy's ingress rules, for a pod selected by `policy` (matchLabels only)."""
    for rule in policy["spec"]["ingress"]:
        ports = rule.get("ports")
        if ports is not None and port not in [p["port"] for p in ports]:
            continue
        peers = rule.get("from")
        if peers is None:
            return True
        for peer in peers:
            assert set(peer) <= {"podSelector", "namespaceSelector"}, peer
            if "namespaceSelector" in peer:
                in_namespace = _selects(peer["namespaceSelector"], {})  # {}: any namespace
            else:
                in_namespace = same_namespace
            if in_namespace and _selects(peer.get("podSelector", {}), source):
                return True
    return False


def test_the_network_policy_keeps_rays_ports_to_costgates_own_pods():
    docs = _by_kind(yaml_docs(GENERATED))
    policy, service = docs["NetworkPolicy"], docs["RayService"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    cluster = service["spec"]["rayClusterConfig"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        assert _selects(policy["spec"]["podSelector"], group["template"]["metadata"]["labels"])
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in head["ports"]}
    ray_ports = [ports["gcs-server"], ports["dashboard"], ports["client"]]
    # Ray's agent (52365) and raylet/object manager/worker ports are not listed on the
    # container: they are closed by the same rules
    ray_ports += [52365, 8076, 10002]
    ray_pod = cluster["headGroupSpec"]["template"]["metadata"]["labels"]
    editor = _by_kind(yaml_docs(K8S / "dashboard.yaml"))["Deployment"]
    editor_pod = editor["spec"]["template"]["metadata"]["labels"]
    stranger = {"app": "something-else"}
    operator = {"app.kubernetes.io/name": "kuberay-operator"}
    for port in ray_ports:
        assert _admits(policy, ray_pod, True, port), port  # the other Ray nodes
        assert _admits(policy, editor_pod, True, port), port
        assert not _admits(policy, stranger, True, port), port
        assert not _admits(policy, stranger, False, port), port
        assert not _admits(policy, ray_pod, False, port), port  # same labels, elsewhere
    # the operator reaches the dashboard (to deploy serveConfigV2) and nothing else of Ray
    assert _admits(policy, operator, False, ports["dashboard"])
    assert not _admits(policy, operator, False, ports["gcs-server"])
    # the gateway's API and Ray's metrics stay open to whoever may reach the pods
    for port in (ports["serve"], ports["metrics"]):
        assert _admits(policy, stranger, False, port)


def test_the_spool_lives_on_a_shared_claim_and_workers_drain_before_they_stop():
    docs = list(yaml.safe_load_all(GENERATED.read_text()))
    [claim] = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    [rs] = [d for d in docs if d["kind"] == "RayService"]
    cluster = rs["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [
        g["template"]["spec"] for g in cluster["workerGroupSpecs"]
    ]
    for pod in pods:
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["spool"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["spool"] == mounts["state"] + "/spool"
    grace = load_config(CONTAINER_CONFIG).gateway.graceful_shutdown_timeout_s
    for group in cluster["workerGroupSpecs"]:
        spec = group["template"]["spec"]
        command = " ".join(spec["containers"][0]["lifecycle"]["preStop"]["exec"]["command"])
        assert "ray drain-node" in command and f"sleep {int(grace)}" in command
        assert spec["terminationGracePeriodSeconds"] > grace


def test_the_dashboard_patches_the_rayservice_with_a_service_account_that_may_do_only_that():
    service = _by_kind(yaml_docs(GENERATED))["RayService"]
    docs = _by_kind(yaml_docs(K8S / "dashboard.yaml"))
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["COSTGATE_ROUTING_TARGET"] == "kuberay"
    assert env["COSTGATE_KUBERAY_RAYSERVICE"] == service["metadata"]["name"]
    account = docs["ServiceAccount"]["metadata"]["name"]
    assert pod["serviceAccountName"] == account
    binding = docs["RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account}]
    assert binding["roleRef"]["name"] == docs["Role"]["metadata"]["name"]
    assert docs["Role"]["rules"] == [
        {
            "apiGroups": ["ray.io"],
            "resources": ["rayservices"],
            "resourceNames": [service["metadata"]["name"]],
            "verbs": ["get", "patch"],
        }
    ]
