"""Every Kubernetes object we ship validates against Kubernetes' own schemas, strictly
(an unknown or misspelt field fails, as `kubectl apply` with server-side validation would).

The schemas come with the `kubernetes-validate` package (no cluster, no network). KubeRay's
RayService is a custom resource it has no schema for: its pod templates, which is where
nearly all of its fields are, are validated as the core PodTemplateSpec they are, and its
KubeRay-level fields are checked in test_kuberay.py.
"""

from __future__ import annotations

import kubernetes_validate
import pytest

from tests.deploy.repo_files import K8S, yaml_docs

# the oldest Kubernetes our manifests claim to work on (docs/kuberay.md)
KUBERNETES_VERSION = "1.29"
# custom resources: validated by their own tests (RayService below, PodMonitor's fields
# by test_kuberay.py's scrape test)
CUSTOM_KINDS = {"RayService", "PodMonitor"}


def _shipped() -> list[tuple[str, dict]]:
    return [
        (f"{path.name}:{doc['kind']}", doc)
        for path in sorted(K8S.glob("*.yaml"))
        for doc in yaml_docs(path)
    ]


@pytest.mark.parametrize(
    "doc",
    [d for _, d in _shipped() if d["kind"] not in CUSTOM_KINDS],
    ids=[n for n, d in _shipped() if d["kind"] not in CUSTOM_KINDS],
)
def test_every_built_in_object_validates_strictly(doc: dict) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_rayservice_pod_templates_validate_as_pod_templates() -> None:
    (service,) = [d for d in yaml_docs(K8S / "costgate.yaml") if d["kind"] == "RayService"]
    cluster = service["spec"]["rayClusterConfig"]
    templates = [cluster["headGroupSpec"]["template"]]
    templates += [group["template"] for group in cluster["workerGroupSpecs"]]
    for template in templates:
        kubernetes_validate.validate(
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": "t"},
                "template": template,
            },
            KUBERNETES_VERSION,
            strict=True,
        )


def test_the_validation_catches_a_misspelt_field() -> None:
    # the check above is only worth something if a wrong manifest fails it
    (policy,) = [d for d in yaml_docs(K8S / "costgate.yaml") if d["kind"] == "NetworkPolicy"]
    policy["spec"]["ingres"] = policy["spec"].pop("ingress")
    with pytest.raises(kubernetes_validate.ValidationError, match="ingres"):
        kubernetes_validate.validate(policy, KUBERNETES_VERSION, strict=True)
