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
