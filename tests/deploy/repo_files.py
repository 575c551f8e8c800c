"""Paths of the deploy files under test, from the repository root."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
GRAFANA = ROOT / "deploy" / "grafana"
K8S = ROOT / "deploy" / "k8s"
CONTAINER_CONFIG = ROOT / "deploy" / "config" / "costgate.yaml"
EXAMPLE_CONFIG = ROOT / "config" / "costgate.example.yaml"
EXAMPLE_ENV = ROOT / "example.env"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def yaml_docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def checkable_prometheus_config(workdir: Path) -> Path:
    """The compose Prometheus config as promtool can check it outside the container: the
    metrics token (a compose secret under /run/secrets/) as a file in `workdir`, and the
    rules beside the copy as they are beside the original."""
    config = yaml.safe_load(PROMETHEUS.read_text())
    token = workdir / "metrics_token"
    token.write_text("a-token\n")
    for job in config["scrape_configs"]:
        if "authorization" in job:
            assert job["authorization"]["credentials_file"].startswith("/run/secrets/")
            job["authorization"]["credentials_file"] = str(token)
    checked = workdir / "prometheus.yml"
    checked.write_text(yaml.safe_dump(config))
    (workdir / "rules").symlink_to(PROMETHEUS.parent / "rules")
    return checked
