import os
import re
import subprocess
import sys

import pytest

from gateway.cli.main import build_parser
from gateway.domain.config import load_config
from tests.deploy.repo_files import COMPOSE, EXAMPLE_ENV, PROMETHEUS, ROOT, compose

SERVICES = {
    *("secrets-check", "postgres", "gateway", "dashboard", "sim", "alerts"),
    *("prometheus", "grafana", "redis"),
}
COSTGATE_SERVICES = ("gateway", "dashboard", "sim", "alerts", "secrets-check")
# runs once before the others and exits: no healthcheck, others wait for its success
ONE_SHOT = "secrets-check"
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
        if name == ONE_SHOT:
            continue
        test = svc.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), name


def test_every_port_is_published_on_loopback_only():
    published = [
        (name, port) for name, svc in compose()["services"].items() for port in svc.get("ports", [])
    ]
    assert len(published) >= 5
    for name, port in published:
        # "HOST_IP:HOST_PORT:CONTAINER_PORT"; without the address Docker binds 0.0.0.0
        assert isinstance(port, str) and re.fullmatch(r"127\.0\.0\.1:\d+:\d+", port), (name, port)
    # and nothing is published by the other way of doing it
    for name, svc in compose()["services"].items():
        assert svc.get("network_mode") != "host", name


def test_the_sim_runs_only_in_the_demo_profile():
    services = compose()["services"]
    assert services["sim"]["profiles"] == ["demo"]
    assert all("profiles" not in s for n, s in services.items() if n != "sim")
    # the gateway waits for the sim when it runs, and starts without it otherwise
    assert services["gateway"]["depends_on"]["sim"]["required"] is False


def test_published_ports_match_what_the_services_listen_on():
    services = compose()["services"]
    published = {n: [p.split(":")[-1] for p in s.get("ports", [])] for n, s in services.items()}
    assert "secrets-check" not in published or not published["secrets-check"]
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
    targets = {
        job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
        for job in prom["scrape_configs"]
    }
    cfg = load_config(ROOT / "deploy" / "config" / "costgate.yaml")
    # the gateway (totals over every replica) and the budget watch, one target each
    assert targets == {
        "costgate": [f"gateway:{cfg.gateway.port}"],
        "costgate-budgets": ["alerts:9108"],
    }
    assert all(job["metrics_path"] == "/metrics" for job in prom["scrape_configs"])
    # the gateway binds beyond loopback: Prometheus sends the token its config names
    token_env = cfg.gateway.metrics_token_env
    assert token_env is not None
    gateway_job = next(j for j in prom["scrape_configs"] if j["job_name"] == "costgate")
    path = gateway_job["authorization"]["credentials_file"]
    secret = path.removeprefix("/run/secrets/")
    services = compose()["services"]
    assert secret in services["prometheus"]["secrets"]
    assert compose()["secrets"][secret] == {"environment": token_env}
    assert token_env in services["gateway"]["environment"]
    assert token_env in services["secrets-check"]["command"]


@pytest.mark.parametrize("service", [s for s in COSTGATE_SERVICES if s != ONE_SHOT])
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
        "alerts": "9108",
    }
    assert port == listens[service]
    if service != "gateway":  # the gateway takes its port from its config
        assert listens[service] in svc["command"]


def _secrets_checked() -> list[str]:
    svc = compose()["services"][ONE_SHOT]
    assert svc["command"][0] == "check-secrets"
    return svc["command"][1:]


def test_nothing_starts_before_the_secrets_check_has_passed():
    services = compose()["services"]
    checked = _secrets_checked()
    # every secret the stack needs, i.e. every one whose absence compose refuses
    required = set(re.findall(r"\$\{([A-Z0-9_]+):\?", COMPOSE.read_text()))
    assert set(checked) == required
    assert set(services[ONE_SHOT]["environment"]) == required
    assert services[ONE_SHOT]["restart"] == "no"
    for name, svc in services.items():
        if name != ONE_SHOT:
            condition = svc["depends_on"][ONE_SHOT]["condition"]
            assert condition == "service_completed_successfully", name


def _example_env() -> dict[str, str]:
    values = {}
    for line in EXAMPLE_ENV.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split("=", 1)
            values[name] = value.strip("'")
    return values


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in _example_env()}
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "check-secrets", *_secrets_checked()],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_the_example_envs_placeholders_are_refused_without_being_shown():
    example = _example_env()
    refused = _check(example)
    assert refused.returncode == 1
    for name in _secrets_checked():
        assert f"{name} still holds the example's placeholder" in refused.stderr
        assert example[name] not in refused.stderr + refused.stdout
    # a Ray token that is set but short is refused too (it is the cluster's only lock)
    real = {name: f"real-{name.lower()}-1e5a3b" for name in _secrets_checked()}
    short = _check({**real, "RAY_AUTH_TOKEN": "abc123"})
    assert short.returncode == 1 and "RAY_AUTH_TOKEN is shorter than" in short.stderr
    assert "abc123" not in short.stderr


def test_real_secrets_pass_the_check():
    real = {name: f"real-{name.lower()}-1e5a3b" for name in _secrets_checked()}
    real["RAY_AUTH_TOKEN"] = "Qm9vdHN0cmFwIHRva2VuIGZvciB0aGUgdGVzdHMgb25seQ"
    passed = _check(real)
    assert passed.returncode == 0, passed.stderr
