"""Kubernetes manifests for costgate on KubeRay, generated from the same config as `up`.

`serveConfigV2` is `gateway.control.serve_config.serve_config()`, the very dict `costgate up`
PUTs to Ray's dashboard, with the changes a cluster needs and nothing else:

- the config file and state dir are paths inside the pods (the config comes from a
  ConfigMap generated here from the same YAML, so the two cannot drift);
- Serve's proxy listens on 0.0.0.0 on every node (`EveryNode`): KubeRay's Service
  balances over the proxies of all Ray pods, and its worker readiness probe asks each
  worker's proxy.

Live routing changes patch the RayService's `serveConfigV2` (the deployment's
`user_config`): KubeRay then applies it in place, the same declarative path as the REST
PUT that `costgate routing set` uses. Secrets (DATABASE_URL, provider keys, Ray's token)
come from the `costgate-secrets` Secret, never from the generated manifests.

Ray's control plane is closed, as `costgate up` closes it on one machine:

- token auth: `authOptions: {mode: token, secretName: costgate-secrets}` (KubeRay 1.6+)
  makes the operator send the Secret's `auth_token` on its own dashboard calls, and
  every Ray container also carries `RAY_AUTH_MODE=token` and `RAY_AUTH_TOKEN` from that
  key itself (KubeRay adds them only where absent), so the pods run in token mode even
  under an operator that would not inject them;
- a NetworkPolicy: Ray's ports (GCS, dashboard, client, agents, raylets, object
  store, workers) answer costgate's own pods only; the gateway's Serve port and Ray's
  metrics port answer anyone the cluster lets through, and KubeRay's operator reaches
  the dashboard port, which it needs to deploy `serveConfigV2`.
"""

from __future__ import annotations

import copy
import importlib.metadata
from pathlib import Path
from typing import Any

import yaml

from gateway.control.serve_config import serve_config, serve_shutdown_env
from gateway.domain.config import Config

CONFIG_DIR = "/etc/costgate"
CONFIG_PATH = Path(CONFIG_DIR) / "costgate.yaml"
STATE_DIR = Path("/var/lib/costgate")
SECRET = "costgate-secrets"
# the key KubeRay reads Ray's token from in the Secret `authOptions.secretName` names
RAY_TOKEN_KEY = "auth_token"
SERVE_PORT = 8000
RAY_METRICS_PORT = 8080
PART_OF = {"app.kubernetes.io/part-of": "costgate"}


def cluster_serve_config(cfg: Config) -> dict[str, Any]:
    sc = copy.deepcopy(serve_config(cfg, config_path=CONFIG_PATH, state_dir=STATE_DIR))
    sc["proxy_location"] = "EveryNode"
    sc["http_options"]["host"] = "0.0.0.0"
    sc["http_options"]["port"] = SERVE_PORT
    # the pod paths, whatever resolve() makes of them on the machine generating this
    for app in sc["applications"]:
        app["args"]["config_path"] = str(CONFIG_PATH)
        app["args"]["state_dir"] = str(STATE_DIR)
    return sc


def _secret_env(cfg: Config) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {
            "name": "DATABASE_URL",
            "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "DATABASE_URL"}},
        },
        # optional: a streaming replica the usage API reads the ledger from
        {
            "name": "DATABASE_READ_URL",
            "valueFrom": {
                "secretKeyRef": {"name": SECRET, "key": "DATABASE_READ_URL", "optional": True}
            },
        },
    ]
    names = sorted({p.api_key_env for p in cfg.providers if p.api_key_env})
    names += [n for n in cfg.gateway.static_key_envs if n not in names]
    # unset, /metrics refuses every scrape (the pods bind beyond loopback): never open
    token_env = cfg.gateway.metrics_token_env
    names += [token_env] if token_env and token_env not in names else []
    for name in names:
        ref = {"name": SECRET, "key": name, "optional": True}
        env.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
    return env


def _ray_auth_env() -> list[dict[str, Any]]:
    """Token mode for every Ray process of the pod, with the token from the Secret (not
    optional: a pod without it must not start)."""
    return [
        {"name": "RAY_AUTH_MODE", "value": "token"},
        {
            "name": "RAY_AUTH_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": SECRET, "key": RAY_TOKEN_KEY}},
        },
    ]


def _ray_container(
    name: str,
    image: str,
    env: list[dict[str, Any]],
    ports: list[dict[str, Any]],
    cpu: str,
    memory: str,
) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "ports": ports,
        "env": [
            {"name": "COSTGATE_CONFIG", "value": str(CONFIG_PATH)},
            {"name": "COSTGATE_STATE_DIR", "value": str(STATE_DIR)},
            *env,
        ],
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "state", "mountPath": str(STATE_DIR)},
            {"name": "spool", "mountPath": str(STATE_DIR / "spool")},
            # Ray's object store lives in /dev/shm
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
    }


def _volumes(config_map: str, spool_claim: str) -> list[dict[str, Any]]:
    return [
        {"name": "config", "configMap": {"name": config_map}},
        {"name": "state", "emptyDir": {}},
        # spooled ledger rows wait here while PostgreSQL is away: a claim every Ray pod
        # shares, so rows outlive their pod and a replica elsewhere replays them (spool
        # files are claimed by rename and owned by a lock, never by PID)
        {"name": "spool", "persistentVolumeClaim": {"claimName": spool_claim}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
    ]


def spool_claim(name: str, size: str = "5Gi") -> dict[str, Any]:
    """The spool's volume: ReadWriteMany, because every Ray pod writes its own files
    there and adopts a dead pod's (a storage class with RWX: NFS, EFS, Filestore...)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "costgate"}},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}},
    }


def _drain_on_stop(grace_s: int) -> dict[str, Any]:
    """preStop: ask Ray to drain this node (Serve moves its replicas off and shuts them
    down gracefully, flushing the ledger), then wait out the replicas' own grace period
    before Kubernetes sends SIGTERM."""
    command = (
        "ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION "
        f"--reason-message 'pod terminating' --deadline-remaining-seconds {grace_s} "
        f"|| true; sleep {grace_s}"
    )
    return {"preStop": {"exec": {"command": ["/bin/sh", "-c", command]}}}


def rayservice(
    cfg: Config,
    *,
    name: str,
    image: str,
    config_map: str,
    ray_version: str,
    workers: tuple[int, int, int],
) -> dict[str, Any]:
    env = _secret_env(cfg) + _ray_auth_env()
    # Serve's controller waits for the replicas' drain and flush when it shuts down
    env += [{"name": k, "value": v} for k, v in serve_shutdown_env(cfg).items()]
    ray = cfg.gateway.ray
    claim = f"{name}-spool"
    # Serve's graceful shutdown covers the longest stream; the pod gets that and a margin
    grace_s = int(cfg.gateway.graceful_shutdown_timeout_s)
    worker = _ray_container("ray-worker", image, env, _worker_ports(), "2", "4Gi")
    worker["lifecycle"] = _drain_on_stop(grace_s)
    head_ports = [
        {"name": "gcs-server", "containerPort": 6379},
        {"name": "dashboard", "containerPort": ray.dashboard_port},
        {"name": "client", "containerPort": 10001},
        {"name": "serve", "containerPort": SERVE_PORT},
        {"name": "metrics", "containerPort": RAY_METRICS_PORT},
    ]
    labels = ray_pod_labels(name)
    replicas, min_replicas, max_replicas = workers
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "serveConfigV2": yaml.dump(
                cluster_serve_config(cfg), Dumper=_ManifestDumper, sort_keys=False
            ),
            "rayClusterConfig": {
                "rayVersion": ray_version,
                # the operator reads the token from our Secret for its own dashboard calls
                # (without secretName it would make a Secret of its own, another token)
                "authOptions": {"mode": "token", "secretName": SECRET},
                "enableInTreeAutoscaling": cfg.gateway.autoscaling is not None,
                "headGroupSpec": {
                    "rayStartParams": {
                        "dashboard-host": "0.0.0.0",
                        "dashboard-port": str(ray.dashboard_port),
                        "metrics-export-port": str(RAY_METRICS_PORT),
                        # replicas go to workers; the head keeps Serve's controller, the
                        # proxy and the metrics hub (which needs no CPU)
                        "num-cpus": "0",
                    },
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "containers": [
                                _ray_container("ray-head", image, env, head_ports, "1", "4Gi")
                            ],
                            "volumes": _volumes(config_map, claim),
                        },
                    },
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gateway",
                        "replicas": replicas,
                        "minReplicas": min_replicas,
                        "maxReplicas": max_replicas,
                        "rayStartParams": {"metrics-export-port": str(RAY_METRICS_PORT)},
                        "template": {
                            "metadata": {"labels": labels},
                            "spec": {
                                "containers": [worker],
                                "terminationGracePeriodSeconds": grace_s + 30,
                                "volumes": _volumes(config_map, claim),
                            },
                        },
                    }
                ],
            },
        },
    }


def _worker_ports() -> list[dict[str, Any]]:
    return [
        {"name": "serve", "containerPort": SERVE_PORT},
        {"name": "metrics", "containerPort": RAY_METRICS_PORT},
    ]


def ray_pod_labels(name: str) -> dict[str, str]:
    # not app.kubernetes.io/name: KubeRay sets that label on its pods and selects on it
    return {**PART_OF, "app.kubernetes.io/component": "gateway", "costgate/instance": name}


def network_policy(name: str, cfg: Config) -> dict[str, Any]:
    """Ray's ports for costgate's own pods only; Serve and metrics for everyone allowed in.

    Ray nodes talk to each other on many ports (GCS, raylets, object managers, worker
    ports, agents), most of them chosen at start: the rule for costgate's pods opens all
    of them rather than a list that would go stale, and the other rules name the only
    ports anything else may reach.
    """
    tcp = [{"protocol": "TCP", "port": port} for port in (SERVE_PORT, RAY_METRICS_PORT)]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{name}-ray", "labels": dict(PART_OF)},
        "spec": {
            "podSelector": {"matchLabels": ray_pod_labels(name)},
            "policyTypes": ["Ingress"],
            "ingress": [
                # the gateway's API (and its /metrics) and Ray's per-node metrics
                {"ports": tcp},
                # every port, from the project's own pods: the other Ray nodes, the
                # dashboard's routing editor, the migration Job
                {"from": [{"podSelector": {"matchLabels": dict(PART_OF)}}]},
                # KubeRay's operator, from whichever namespace it runs in, submits
                # serveConfigV2 and reads Serve's status on the dashboard port only
                {
                    "from": [
                        {
                            "namespaceSelector": {},
                            "podSelector": {
                                "matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}
                            },
                        }
                    ],
                    "ports": [{"protocol": "TCP", "port": cfg.gateway.ray.dashboard_port}],
                },
            ],
        },
    }


def config_map(name: str, config_text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": dict(PART_OF)},
        "data": {CONFIG_PATH.name: config_text},
    }


def migrate_job(name: str, image: str, config_map_name: str) -> dict[str, Any]:
    """Migrations and the config's prices, as `costgate up` does before it deploys."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{name}-migrate", "labels": dict(PART_OF)},
        "spec": {
            "backoffLimit": 6,
            "template": {
                "metadata": {"labels": dict(PART_OF)},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [
                        {
                            "name": "migrate",
                            "image": image,
                            "args": ["migrate", "--config", str(CONFIG_PATH)],
                            "env": [
                                {
                                    "name": "DATABASE_URL",
                                    "valueFrom": {
                                        "secretKeyRef": {"name": SECRET, "key": "DATABASE_URL"}
                                    },
                                }
                            ],
                            "volumeMounts": [
                                {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}
                            ],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": config_map_name}}],
                },
            },
        },
    }


def manifests(
    cfg: Config,
    config_text: str,
    *,
    name: str = "costgate",
    image: str = "costgate:latest",
    ray_version: str | None = None,
    workers: tuple[int, int, int] = (1, 1, 3),
) -> list[dict[str, Any]]:
    """ConfigMap, NetworkPolicy, the spool's claim, migration Job and RayService, in the
    order to apply them (the policy first: no Ray pod is ever up without it)."""
    if ray_version is None:
        ray_version = importlib.metadata.version("ray")
    cm = f"{name}-config"
    return [
        config_map(cm, config_text),
        network_policy(name, cfg),
        spool_claim(f"{name}-spool"),
        migrate_job(name, image, cm),
        rayservice(
            cfg, name=name, image=image, config_map=cm, ray_version=ray_version, workers=workers
        ),
    ]


class _ManifestDumper(yaml.SafeDumper):
    """Readable manifests: multi-line strings as literal blocks, no YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _str)


def render(docs: list[dict[str, Any]], source: str) -> str:
    header = (
        f"# Generated by `costgate k8s-manifest` from {source}: do not edit by hand.\n"
        "# Apply after deploy/k8s/secret.example.yaml (filled in, as costgate-secrets).\n"
    )
    return header + "---\n".join(
        yaml.dump(d, Dumper=_ManifestDumper, sort_keys=False, width=100, allow_unicode=True)
        for d in docs
    )
