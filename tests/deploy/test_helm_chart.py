"""The Helm chart deploy/helm/costgate renders to the manifests `costgate k8s-manifest`
and deploy/k8s/dashboard.yaml ship, and every object it renders validates strictly.

Helm itself is not installable here (no Debian package; the PyPI bindings need Python
3.12+), so the chart keeps to Go's text/template with no function of Helm's own library,
and this test renders it with the text/template engine of kubectl (`-o go-template-file`,
`--local`: no cluster), with the data Helm passes (`.Values` from values.yaml and the
overrides, `.Release`). That is Go's own parser and executor, as in Helm; what it does not
check is what Helm adds around them (chart schema, hooks, `helm lint`'s rules).
"""

from __future__ import annotations

import argparse
import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gateway.cli import deploy as cli_deploy
from tests.deploy.repo_files import K8S, ROOT, yaml_docs
from tests.deploy.test_k8s_schemas import CUSTOM_KINDS, KUBERNETES_VERSION

CHART = ROOT / "deploy" / "helm" / "costgate"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) else value
    return out


def render_text(template: Path, values: dict[str, Any], tmp: Path, revision: int = 1) -> str:
    data = {
        # kubectl wants an object; the template sees the whole of it, as Helm's top level
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "helm-render"},
        "Values": values,
        "Release": {"Name": "costgate", "Namespace": "default", "Revision": revision},
        "Chart": yaml.safe_load((CHART / "Chart.yaml").read_text()),
    }
    data_file = tmp / "data.yaml"
    data_file.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [KUBECTL, "annotate", "--local", "-f", str(data_file), "costgate/render=1",
         "-o", f"go-template-file={template}"],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), "KUBECONFIG": str(tmp / "none")},
    )  # fmt: skip
    assert done.returncode == 0, f"{template.name}: {done.stderr}"
    assert "<no value>" not in done.stdout, f"{template.name} names a value that is not set"
    return done.stdout


def render(tmp: Path, overrides: dict[str, Any] | None = None, revision: int = 1) -> list[dict]:
    values = _merged(yaml.safe_load((CHART / "values.yaml").read_text()), overrides or {})
    docs = []
    for template in sorted((CHART / "templates").glob("*.yaml")):
        text = render_text(template, values, tmp, revision)
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def _strings(node: Any, key: str = "") -> list[tuple[str, str]]:
    """Every (key, string value) in the objects, but the config file's text they carry."""
    if isinstance(node, dict):
        return [
            found
            for k, v in node.items()
            if k not in ("serveConfigV2", "data")
            for found in _strings(v, str(k))
        ]
    if isinstance(node, list):
        return [found for item in node for found in _strings(item, key)]
    return [(key, node)] if isinstance(node, str) else []


def _key(doc: dict) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def test_kubectl_renders_go_templates_here():
    # the renderer this file relies on: present on every machine of this kind and CI's
    assert Path(KUBECTL).exists(), "kubectl (Debian package on this machine kind) is missing"


def test_the_default_values_render_what_k8s_manifest_and_the_dashboard_manifest_ship(tmp_path):
    rendered = {_key(d): d for d in render(tmp_path)}
    shipped = {
        _key(d): d for d in yaml_docs(K8S / "costgate.yaml") + yaml_docs(K8S / "dashboard.yaml")
    }
    # the one difference, by design: a Job per release revision (its pod template is
    # immutable, and each upgrade must run the migrations)
    job = shipped.pop(("Job", "costgate-migrate"))
    job["metadata"]["name"] = "costgate-migrate-1"
    shipped[_key(job)] = job
    assert sorted(rendered) == sorted(shipped)
    for key, doc in shipped.items():
        assert rendered[key] == doc, key


def test_every_rendered_object_validates_strictly(tmp_path):
    docs = render(tmp_path, {"name": "gw-prod", "workers": {"replicas": 2, "maxReplicas": 6}})
    for doc in docs:
        if doc["kind"] not in CUSTOM_KINDS:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    (service,) = [d for d in docs if d["kind"] == "RayService"]
    cluster = service["spec"]["rayClusterConfig"]
    for template in [cluster["headGroupSpec"]["template"]] + [
        g["template"] for g in cluster["workerGroupSpecs"]
    ]:
        pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
        pod_template["template"] = template
        kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)


def test_values_name_the_resources_image_workers_and_what_is_installed(tmp_path):
    overrides = {
        "name": "gw-prod",
        "image": {"repository": "registry.example/costgate", "tag": "0.2.0"},
        "rayVersion": "2.60.1",
        "workers": {"replicas": 2, "minReplicas": 2, "maxReplicas": 8},
        "spool": {"size": "20Gi"},
        "dashboard": {"replicas": 2},
    }
    docs = render(tmp_path, overrides, revision=7)
    by_kind = {d["kind"]: d for d in docs}
    assert by_kind["Job"]["metadata"]["name"] == "gw-prod-migrate-7"
    service = by_kind["RayService"]
    assert service["metadata"]["name"] == "gw-prod"
    cluster = service["spec"]["rayClusterConfig"]
    assert cluster["rayVersion"] == "2.60.1"
    (workers,) = cluster["workerGroupSpecs"]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (2, 2, 8)
    assert by_kind["PersistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"] == "20Gi"
    dashboard = by_kind["Deployment"]
    assert dashboard["spec"]["replicas"] == 2
    (container,) = dashboard["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/costgate:0.2.0"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["COSTGATE_KUBERAY_RAYSERVICE"] == "gw-prod"
    assert env["COSTGATE_RAY_DASHBOARD_URL"] == "http://gw-prod-head-svc:8265"
    assert by_kind["Role"]["rules"][0]["resourceNames"] == ["gw-prod"]
    # nothing is left under the default name but the Secret (which the user makes) and
    # the project's label; the config file's own text is the config's
    leftovers = [
        (key, value)
        for key, value in _strings(docs)
        if ("costgate-" in value and value != "costgate-secrets")
        or (value == "costgate" and key != "app.kubernetes.io/part-of")
    ]
    assert leftovers == []
    off = render(
        tmp_path,
        {"dashboard": {"enabled": False}, "networkPolicy": {"enabled": False},
         "migrations": {"enabled": False}},
    )  # fmt: skip
    kinds = sorted(d["kind"] for d in off)
    assert kinds == ["ConfigMap", "PersistentVolumeClaim", "RayService"]


def test_a_value_the_chart_does_not_set_fails_the_render(tmp_path):
    # the checks above are only worth something if a wrong template fails them
    broken = tmp_path / "broken.yaml"
    broken.write_text("image: {{ .Values.image.tga }}\n")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    with pytest.raises(AssertionError, match="names a value that is not set"):
        render_text(broken, values, tmp_path)
    broken.write_text("image: {{ .Values.image.tag | quote }}\n")  # Helm's own library
    with pytest.raises(AssertionError, match="quote"):
        render_text(broken, values, tmp_path)


def test_the_committed_chart_is_up_to_date(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    parser = argparse.ArgumentParser()
    cli_deploy.register(parser.add_subparsers())
    out = tmp_path / "chart"
    args = parser.parse_args(
        ["helm-chart", "--config", "deploy/config/costgate.yaml", "-o", str(out)]
    )
    assert args.func(args) == 0
    made = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert made == sorted(p.relative_to(CHART) for p in CHART.rglob("*") if p.is_file())
    for path in made:
        assert (out / path).read_text() == (CHART / path).read_text(), (
            f"{path}: regenerate with costgate helm-chart --config deploy/config/costgate.yaml"
        )
