"""Where a live routing change goes: Serve's REST API, or a KubeRay RayService (config
`routing:`).

On one machine (`target: serve`) `costgate routing set` and the dashboard PUT Serve's
declarative config to the Ray dashboard. Under KubeRay (`target: kuberay`) the operator
owns that config and submits the RayService's `serveConfigV2` again whenever it decides
to, so a PUT to the dashboard would be reverted: the change is a patch of the RayService
through the Kubernetes API instead (gateway.control.kuberay_routing).

How the Kubernetes API is reached, first that applies:

- `api_server` given: that URL, with the bearer token read from `token_file` and the
  server's CA from `ca_file` (both default to a pod's service-account files);
- `kubeconfig` given: that file's current (or `context`) cluster and user;
- inside a pod (KUBERNETES_SERVICE_HOST set): the in-cluster address and the pod's
  service account;
- else $KUBECONFIG, else ~/.kube/config.

No credential is ever in this file: only paths to where they are.

The container config is shared by docker compose and Kubernetes, so the environment may
pick the target as well: COSTGATE_ROUTING_TARGET, COSTGATE_KUBERAY_NAMESPACE and
COSTGATE_KUBERAY_RAYSERVICE (the Helm chart and deploy/k8s/dashboard.yaml set them)
override the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_DNS_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class KubeRayTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # the RayService `costgate k8s-manifest --name` (or the Helm chart's `name`) made
    rayservice: str = Field(default="costgate", max_length=63, pattern=_DNS_NAME)
    # none: the pod's own namespace (its service account says), else the kubeconfig
    # context's, else "default"
    namespace: str | None = Field(default=None, max_length=63, pattern=_DNS_NAME)
    api_server: str | None = Field(default=None, pattern=r"^https?://")
    token_file: Path = SERVICE_ACCOUNT_DIR / "token"
    ca_file: Path = SERVICE_ACCOUNT_DIR / "ca.crt"
    kubeconfig: Path | None = None
    context: str | None = None
    # how long one call to the API server may take; the rollout has its own timeout
    request_timeout_s: float = Field(default=10.0, gt=0)


class RoutingTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target: Literal["serve", "kuberay"] = "serve"
    kuberay: KubeRayTarget = KubeRayTarget()


def effective_target(configured: RoutingTarget, environ: Mapping[str, str]) -> RoutingTarget:
    """The configured target with the environment's overrides; ValueError names a bad one."""
    target = environ.get("COSTGATE_ROUTING_TARGET") or configured.target
    kuberay = configured.kuberay.model_dump(exclude_unset=True)
    for var, key in (
        ("COSTGATE_KUBERAY_NAMESPACE", "namespace"),
        ("COSTGATE_KUBERAY_RAYSERVICE", "rayservice"),
    ):
        if environ.get(var):
            kuberay[key] = environ[var]
    try:
        return RoutingTarget.model_validate({"target": target, "kuberay": kuberay})
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r})"
            for e in err.errors()
        )
        raise ValueError(f"routing target from the environment: {problems}") from None
