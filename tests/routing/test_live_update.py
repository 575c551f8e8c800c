"""Live routing changes on a real Ray Serve gateway (2 replicas, the sim upstream, PostgreSQL).

The gateway runs on this module's own ports with Ray's token auth on, next to a second
Serve application (a bystander) that every change must leave running. Starting it takes
30-40 s on 2 cores, once for the module.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from db.routing_audit import list_routing_changes
from gateway.config import Config, load_config
from gateway.routing_settings import RoutingError
from gateway.routing_update import (
    RoutingUpdateError,
    ServeAdmin,
    apply_routing_change,
    read_live_routing,
)
from tests.fixtures.gateway import PROVIDER_SECRET, gateway_config

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
# this module's ports (the routing range); Ray's client and agent ports follow the head's
GATEWAY_PORT = 19380
DASHBOARD_PORT = 19382
METRICS_PORT = 19383
HEAD_PORT = 19384
COSTGATE = [sys.executable, "-m", "gateway.cli"]
BYSTANDER = "bystander"
SEEDS_MIX = {"deepseek-v3.2": "60", "gemini-2.5-flash": "30", "claude-sonnet-4.5": "10"}


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
            [*COSTGATE, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
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
        while time.monotonic() < deadline:
            app = admin.instance()["applications"].get(BYSTANDER) or {}
            if app.get("status") == "RUNNING":
                return
            time.sleep(0.5)
    raise AssertionError(f"the bystander app did not start: {app}")


@pytest.fixture(scope="module")
def routing_gateway(
    sim_server: Any, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoutingGateway]:
    workdir = tmp_path_factory.mktemp("routing-gw")
    config_path = gateway_config(
        Path(sim_server.config_path),
        workdir / "costgate.yaml",
        port=GATEWAY_PORT,
        require_keys=False,
        ray={
            "head_port": HEAD_PORT,
            "dashboard_port": DASHBOARD_PORT,
            "metrics_export_port": METRICS_PORT,
        },
    )
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
        base_url=f"http://127.0.0.1:{GATEWAY_PORT}",
        dashboard_url=f"http://127.0.0.1:{DASHBOARD_PORT}",
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


def set_auto(gw: RoutingGateway, weights: dict[str, str], note: str) -> None:
    apply_routing_change(
        gw.dashboard_url,
        gw.app_name,
        "auto",
        weights,
        "tests",
        note,
        gw.database_url,
        cfg=gw.cfg,
        gateway_url=gw.base_url,
    )


def test_dashboard_calls_without_the_token_are_refused(routing_gateway) -> None:
    with (
        ServeAdmin(routing_gateway.dashboard_url, headers={}) as admin,
        pytest.raises(RoutingUpdateError, match="refused our credentials"),
    ):
        admin.instance()


def test_show_prints_the_weights_the_replicas_run(routing_gateway) -> None:
    gw = routing_gateway
    set_auto(gw, SEEDS_MIX, "seeds' mix")
    shown = gw.cli("routing", "show", "--config", str(gw.config_path))
    assert shown.returncode == 0, shown.stderr
    assert "deepseek-v3.2" in shown.stdout and "60.0%" in shown.stdout
    live = read_live_routing(gw.dashboard_url, gw.app_name, cfg=gw.cfg)
    assert {m: str(w) for m, w in live.settings.aliases["auto"].items()} == SEEDS_MIX
    assert len(live.pids) == 2


def test_invalid_weights_are_refused_before_anything_is_sent(routing_gateway) -> None:
    gw = routing_gateway
    with gw.admin() as admin:
        before = admin.instance()["applications"][gw.app_name]["last_deployed_time_s"]
    version = read_live_routing(gw.dashboard_url, gw.app_name, cfg=gw.cfg).settings.version
    for weights in (
        ["deepseek-v3.2=-1", "gemini-2.5-flash=5"],
        ["deepseek-v3.2=0", "gemini-2.5-flash=0", "claude-sonnet-4.5=0"],
        ["gpt-9=10"],
    ):
        out = gw.cli(
            "routing", "set", "auto", *weights, "--note", "bad", "--config", str(gw.config_path)
        )
        assert out.returncode == 2 and "nothing was sent" in out.stderr, out.stderr
    with pytest.raises(RoutingError):
        apply_routing_change(
            gw.dashboard_url, gw.app_name, "nope", {"gpt-4.1": 1}, "t", None, gw.database_url
        )
    with gw.admin() as admin:
        after = admin.instance()["applications"][gw.app_name]["last_deployed_time_s"]
    assert after == before
    assert read_live_routing(gw.dashboard_url, gw.app_name, cfg=gw.cfg).settings.version == version


@dataclasses.dataclass
class Sent:
    started: float
    ended: float
    status: int
    model: str | None


def drive_traffic(base_url: str, stop: threading.Event, out: list[Sent], cap: int) -> None:
    """One client of the bench traffic: `auto` requests back to back, bounded by `cap`."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for i in range(cap):
            if stop.is_set():
                return
            t0 = time.monotonic()
            try:
                resp = client.post(
                    "/v1/chat/completions",
                    json={
                        "model": "auto",
                        "messages": [{"role": "user", "content": f"hello {i}"}],
                        "max_tokens": 16,
                    },
                )
                status, model = resp.status_code, resp.headers.get("x-costgate-model")
            except httpx.HTTPError:
                status, model = 0, None
            out.append(Sent(t0, time.monotonic(), status, model))


def test_weights_move_live_under_load_in_place_and_audited(routing_gateway) -> None:
    gw = routing_gateway
    set_auto(gw, SEEDS_MIX, "seeds' mix")
    pids_before = gw.replica_pids()
    bystander_pids = gw.replica_pids(BYSTANDER)
    stop = threading.Event()
    sent: list[Sent] = []
    clients = [
        threading.Thread(target=drive_traffic, args=(gw.base_url, stop, sent, 4000))
        for _ in range(4)
    ]
    for c in clients:
        c.start()
    try:
        time.sleep(4)
        changed = gw.cli(
            "routing",
            "set",
            "auto",
            "deepseek-v3.2=0",
            "gemini-2.5-flash=0",
            "claude-sonnet-4.5=100",
            "--note",
            "move everything to claude",
            "--actor",
            "ops:test",
            "--config",
            str(gw.config_path),
        )
        returned = time.monotonic()
        time.sleep(6)
    finally:
        stop.set()
        for c in clients:
            c.join(timeout=60)
    assert changed.returncode == 0, changed.stderr
    assert "in place, same PIDs" in changed.stdout

    before = [s for s in sent if s.ended < returned - 3]
    after = [s for s in sent if s.started >= returned]
    assert len(before) > 50 and len(after) > 50, (len(before), len(after))
    # no request failed during the change
    assert Counter(s.status for s in sent) == {200: len(sent)}
    # the seeds' mix was live before...
    assert {"deepseek-v3.2", "gemini-2.5-flash"} <= {s.model for s in before}
    # ...and every request sent after the command returned went to the new model
    assert Counter(s.model for s in after) == {"claude-sonnet-4.5": len(after)}
    # same processes: the replicas were reconfigured, not restarted
    assert gw.replica_pids() == pids_before
    assert gw.replica_pids(BYSTANDER) == bystander_pids

    (row,) = list_routing_changes(gw.database_url, app_name=gw.app_name, alias="auto", limit=1)
    assert (row.actor, row.note) == ("ops:test", "move everything to claude")
    assert row.before == SEEDS_MIX
    assert row.after == {"deepseek-v3.2": "0", "gemini-2.5-flash": "0", "claude-sonnet-4.5": "100"}
    print(
        f"\nlive change under load: {len(sent)} requests, 0 failed; "
        f"{changed.stdout.strip().splitlines()[-1]}"
    )


def test_other_applications_survive_a_change(routing_gateway) -> None:
    gw = routing_gateway
    set_auto(gw, {"gemini-2.5-flash": "1"}, "gemini only")
    with gw.admin() as admin:
        apps = admin.instance()["applications"]
    assert apps[BYSTANDER]["status"] == "RUNNING"
    deployed = apps[BYSTANDER]["deployed_app_config"]["deployments"][0]
    assert deployed["user_config"] == {"routing": {"version": 42}}
    probe = httpx.get(f"{gw.base_url}/bystander/costgate/routing", timeout=10).json()
    assert probe["routing"]["version"] == 42
