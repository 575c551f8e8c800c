import re

import pytest

from gateway.cli.main import build_parser
from gateway.domain.config import load_config
from tests.deploy.repo_files import COMPOSE, EXAMPLE_ENV, PROMETHEUS, ROOT, compose

SERVICES = {"postgres", "gateway", "dashboard", "sim", "prometheus", "grafana"}
COSTGATE_SERVICES = ("gateway", "dashboard", "sim")
_VAR = re.compile(r"\$\{([A-Z0-9_]+)(?::?[-?][^}]*)?\}")


def _env_file_names() -> set[str]:
    names = set()
    for line in EXAMPLE_ENV.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.add(line.split("=", 1)[0])
    return names


def test_every_part_of_the_stack_is_a_service_with_a_healthcheck():
    services = compose()["services"]
    assert set(services) == SERVICES
    for name, svc in services.items():
        test = svc.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), name


def test_the_sim_runs_only_in_the_demo_profile():
    services = compose()["services"]
    assert services["sim"]["profiles"] == ["demo"]
    assert all("profiles" not in s for n, s in services.items() if n != "sim")
    # the gateway waits for the sim when it runs, and starts without it otherwise
    assert services["gateway"]["depends_on"]["sim"]["required"] is False


def test_published_ports_match_what_the_services_listen_on():
    services = compose()["services"]
    published = {n: [p.split(":")[-1] for p in s.get("ports", [])] for n, s in services.items()}
    cfg = load_config(ROOT / "deploy" / "config" / "costgate.yaml")
    assert str(cfg.gateway.port) in published["gateway"]
    assert str(cfg.gateway.ray.dashboard_port) in published["gateway"]
    assert cfg.gateway.host == "0.0.0.0"
    assert "8501" in published["dashboard"]
    assert "8501" in services["dashboard"]["command"]
    assert published["prometheus"] == ["9090"]
    assert published["grafana"] == ["3000"]
    assert "postgres" not in published or not published["postgres"]


def test_data_lives_in_named_volumes():
    doc = compose()
    declared = set(doc["volumes"])
    mounts = {
        m.split(":")[0]: m.split(":")[1]
        for s in doc["services"].values()
        for m in s.get("volumes", [])
    }
    assert mounts["postgres-data"] == "/var/lib/postgresql/data"
    assert mounts["prometheus-data"] == "/prometheus"
    assert mounts["grafana-data"] == "/var/lib/grafana"
    assert mounts["gateway-state"] == "/var/lib/costgate"
    named = {src for src in mounts if not src.startswith(".")}
    assert named == declared


def test_every_bind_mounted_file_exists():
    for svc in compose()["services"].values():
        for mount in svc.get("volumes", []):
            src = mount.split(":")[0]
            if src.startswith("."):
                assert (ROOT / src).exists(), src


def test_secrets_come_only_from_the_git_ignored_env_file():
    text = COMPOSE.read_text()
    referenced = set(_VAR.findall(text))
    assert referenced <= _env_file_names()
    assert {"POSTGRES_PASSWORD", "RAY_AUTH_TOKEN", "GRAFANA_ADMIN_PASSWORD"} <= referenced
    for name, svc in compose()["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if re.search(r"PASSWORD|TOKEN|_API_KEY$|_USERS$|DATABASE_URL", key):
                assert "${" in str(value), f"{name}.{key} holds a literal secret"
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "*.env" in ignored and "!example.env" in ignored


def test_required_secrets_fail_loudly_when_unset():
    text = COMPOSE.read_text()
    for name in ("POSTGRES_PASSWORD", "RAY_AUTH_TOKEN", "GRAFANA_ADMIN_PASSWORD"):
        assert re.search(r"\$\{" + name + r":\?", text), name


@pytest.mark.parametrize("service", COSTGATE_SERVICES)
def test_costgate_commands_are_ones_the_cli_accepts(service):
    svc = compose()["services"][service]
    assert svc["build"] == "."
    args = build_parser().parse_args(svc["command"])
    assert callable(args.func)


def test_prometheus_scrapes_the_gateway_service_on_its_port():
    import yaml

    prom = yaml.safe_load(PROMETHEUS.read_text())
    targets = [
        t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]
    ]
    cfg = load_config(ROOT / "deploy" / "config" / "costgate.yaml")
    assert targets == [f"gateway:{cfg.gateway.port}"]
    assert prom["scrape_configs"][0]["metrics_path"] == "/metrics"


@pytest.mark.parametrize("service", COSTGATE_SERVICES)
def test_python_healthchecks_are_valid_python_probing_the_services_own_port(service):
    svc = compose()["services"][service]
    kind, exe, flag, code = svc["healthcheck"]["test"]
    assert (kind, exe, flag) == ("CMD", "python", "-c")
    compile(code, f"{service} healthcheck", "exec")
    port = re.search(r"127\.0\.0\.1:(\d+)/", code).group(1)
    listens = {
        "gateway": str(load_config(ROOT / "deploy" / "config" / "costgate.yaml").gateway.port),
        "dashboard": "8501",
        "sim": "9100",
    }
    assert port == listens[service]
