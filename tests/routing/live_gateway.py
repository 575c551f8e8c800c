"""A real Ray Serve gateway for the routing tests, on the routing tests' own ports.

`routing_gateway` (package scope): `costgate up` with 2 replicas on the sim upstream and
the test PostgreSQL, Ray's token auth on with a token of its own, and a second Serve
application (`bystander`) next to it that every routing change must leave running.
Starting it takes 30-40 s on 2 cores, once for the tests of this directory that ask for
it; the pure-logic tests here never start it.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.control.routing_update import ServeAdmin
from gateway.domain.config import Config, load_config
from tests.fixtures.gateway import PROVIDER_SECRET, gateway_config
from tests.fixtures.ports import PortBlock, claim_block

REPO = Path(__file__).resolve().parents[2]
COSTGATE = [sys.executable, "-m", "gateway.cli"]
BYSTANDER = "bystander"


@dataclasses.dataclass
class RoutingGateway:
    base_url: str
    dashboard_url: str
    app_name: str
    config_path: Path
    cfg: Config
    database_url: str
    env: dict[str, str]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*COSTGATE, *args], env=self.env, capture_output=True, text=True, timeout=180
        )

    def admin(self) -> ServeAdmin:
        return ServeAdmin(self.dashboard_url)

    def replica_pids(self, app: str | None = None) -> set[int]:
        with self.admin() as admin:
            details = admin.instance()["applications"][app or self.app_name]
        return {r["pid"] for d in details["deployments"].values() for r in d["replicas"]}


def deploy_bystander(dashboard: str) -> None:
    """Add a second application, as another team's app on the same cluster would be."""
    with ServeAdmin(dashboard) as admin:
        current = admin.instance()
        body = {k: current[k] for k in ("proxy_location", "http_options") if current.get(k)}
        body["applications"] = [
            a["deployed_app_config"] for a in current["applications"].values()
        ] + [
            {
                "name": BYSTANDER,
                "route_prefix": "/bystander",
                "import_path": "tests.routing.serve_probe_app:app",
                "deployments": [
                    {
                        "name": "ProbeIngress",
                        "num_replicas": 1,
                        "ray_actor_options": {"num_cpus": 0},
                        "user_config": {"routing": {"version": 42}},
                    }
                ],
            }
        ]
        admin.put(body)
        deadline = time.monotonic() + 120
        app: dict[str, Any] = {}
        while time.monotonic() < deadline:
            app = admin.instance()["applications"].get(BYSTANDER) or {}
            if app.get("status") == "RUNNING":
                return
            time.sleep(0.5)
    raise AssertionError(f"the bystander app did not start: {app}")


def routing_config(sim_config: Path, out: Path, ports: PortBlock) -> Path:
    gateway_config(sim_config, out, ports, require_keys=False)
    config = yaml.safe_load(out.read_text())
    for provider in config["providers"]:
        # a `hang` fault costs one read timeout: keep it short so fault runs stay fast
        provider["timeouts"] = {"connect": 2, "read": 1.5, "total": 6}
    out.write_text(yaml.safe_dump(config))
    return out


@pytest.fixture(scope="package")
def routing_gateway(
    sim_server: Any, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoutingGateway]:
    # a gateway of its own (token auth forced on, a bystander app beside it), so its own
    # port block: the session's `gateway` may run at the same time
    ports = claim_block()
    workdir = tmp_path_factory.mktemp("routing-gw")
    config_path = routing_config(Path(sim_server.config_path), workdir / "costgate.yaml", ports)
    cfg_ports = load_config(config_path).gateway
    token = secrets.token_hex(32)
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        COSTGATE_STATE_DIR=str(workdir / "state"),
        OPENAI_API_KEY=PROVIDER_SECRET,
        DEEPSEEK_API_KEY=PROVIDER_SECRET,
        RELAY_API_KEY=PROVIDER_SECRET,
        # Ray's token auth, on and with a token of our own, whatever ~/.ray holds
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=token,
        # the bystander's module must be importable by Ray's workers
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
    )
    gw = RoutingGateway(
        base_url=f"http://127.0.0.1:{cfg_ports.port}",
        dashboard_url=f"http://127.0.0.1:{cfg_ports.ray.dashboard_port}",
        app_name="costgate",
        config_path=config_path,
        cfg=load_config(config_path),
        database_url=database_url,
        env=env,
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("RAY_AUTH_TOKEN", token)  # for this process's REST calls
    mp.setenv("DATABASE_URL", database_url)
    try:
        up = gw.cli("up", "--config", str(config_path))
        if up.returncode != 0:
            pytest.fail(f"costgate up failed:\n{up.stdout}\n{up.stderr}")
        deploy_bystander(gw.dashboard_url)
        yield gw
    finally:
        gw.cli("down", "--config", str(config_path))
        mp.undo()
        ports.release()
