"""Live routing changes on a real Ray Serve gateway (2 replicas, the sim upstream, PostgreSQL).

The gateway (tests/fixtures/live_gateway.py) runs with Ray's token auth on, as
`costgate up` starts it, next to a second Serve application (a bystander) that every
change must leave running.
"""

from __future__ import annotations

import dataclasses
import stat
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import psutil
import pytest

from db.routing_audit import list_routing_changes
from gateway.control.cluster import ClusterPaths
from gateway.control.declarative import RoutingUpdateError
from gateway.control.ray_processes import CLUSTER_MARKER_ENV, cluster_processes
from gateway.control.routing_update import apply_routing_change, read_live_routing
from gateway.control.serve_admin import APPLICATIONS_PATH, ServeAdmin, ServeAdminError
from gateway.domain.routing_settings import RoutingError
from tests.fixtures.live_gateway import BYSTANDER, RoutingGateway

pytestmark = pytest.mark.ray

SEEDS_MIX = {"deepseek-v3.2": "60", "gemini-2.5-flash": "30", "claude-sonnet-4.5": "10"}


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
    gw = routing_gateway
    # `up` generated the token into its state dir, readable by its user only
    token_file = gw.state_dir / "ray" / "auth_token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    # `up` says where the token is, and never shows it
    assert str(token_file.resolve()) in gw.up_output and gw.ray_token not in gw.up_output
    url = gw.dashboard_url + APPLICATIONS_PATH
    assert httpx.get(url, timeout=10).status_code == 401
    wrong = {"authorization": "Bearer not-the-token"}
    assert httpx.get(url, headers=wrong, timeout=10).status_code == 403
    home_token = Path.home() / ".ray" / "auth_token"
    if home_token.is_file() and home_token.read_text().strip() != gw.ray_token:
        # a token some other Ray on this machine left in ~/.ray opens nothing here
        mine = {"authorization": f"Bearer {home_token.read_text().strip()}"}
        assert httpx.get(url, headers=mine, timeout=10).status_code == 403
    right = {"authorization": f"Bearer {gw.ray_token}"}
    assert httpx.get(url, headers=right, timeout=10).status_code == 200
    with (
        ServeAdmin(gw.dashboard_url, token=None) as admin,
        pytest.raises(ServeAdminError, match="refused our credentials"),
    ):
        admin.instance()
    # every process of the head runs in token mode, pointed at that file and no other
    procs = cluster_processes(ClusterPaths(gw.state_dir).temp_dir)
    assert len(procs) >= 4  # GCS, raylet, dashboard, workers
    for proc in procs:
        try:
            env, name = proc.environ(), proc.name()
        except psutil.NoSuchProcess:
            continue  # a worker that ended meanwhile
        if CLUSTER_MARKER_ENV not in env:
            continue  # an agent whose process title zeroed its environment block
        assert env.get("RAY_AUTH_MODE") == "token", name
        assert env.get("RAY_AUTH_TOKEN_PATH") == str(token_file.resolve()), name
        assert "RAY_AUTH_TOKEN" not in env, name


def test_haproxy_forwards_only_to_ports_of_this_head(routing_gateway) -> None:
    """Replicas in this head's own range, and the fallback proxy on this head's port: with
    Ray's machine-wide defaults another head's proxy answered our clients mid-redeploy."""
    gw = routing_gateway
    ray = gw.cfg.gateway.ray
    first, last = ray.replica_ports()
    haproxy_dir = ClusterPaths(gw.state_dir).haproxy_dir
    # its admin socket is mode 666 (Serve's doing): the folder keeps other users out
    assert stat.S_IMODE(haproxy_dir.stat().st_mode) == 0o700
    configs = list(haproxy_dir.glob("*/haproxy.cfg"))
    assert configs
    servers = [line.split()[2] for cfg in configs for line in cfg.read_text().splitlines()
               if line.strip().startswith("server ")]  # fmt: skip
    fallback = f"127.0.0.1:{ray.ports()['fallback_proxy_port']}"
    assert fallback in servers
    replicas = [s for s in servers if s != fallback]
    assert replicas and all(first <= int(s.rsplit(":", 1)[1]) <= last for s in replicas)
    listening = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == "LISTEN"}
    assert ray.ports()["fallback_proxy_port"] in listening


def test_haproxy_sends_serve_no_line_per_request_by_default(routing_gateway) -> None:
    """Serve's own HTTP metrics (a log line per request that its HAProxy manager parses)
    are off unless `gateway.serve_http_metrics` asks for them: costgate counts requests."""
    haproxy_dir = ClusterPaths(routing_gateway.state_dir).haproxy_dir
    texts = [cfg.read_text() for cfg in haproxy_dir.glob("*/haproxy.cfg")]
    assert texts and all("http_frontend" in text for text in texts)
    assert not any("metrics.sock" in text or "log-format-sd" in text for text in texts)


def test_haproxys_stats_and_metrics_listen_on_loopback_only(routing_gateway) -> None:
    """Ray's template binds both to every interface; the node's processes change it
    (gateway/control/haproxy_site)."""
    ports = routing_gateway.cfg.gateway.ray.ports()
    stats, metrics = ports["haproxy_stats_port"], ports["haproxy_metrics_port"]
    haproxy_dir = ClusterPaths(routing_gateway.state_dir).haproxy_dir
    texts = [cfg.read_text() for cfg in haproxy_dir.glob("*/haproxy.cfg")]
    assert texts and all(f"bind 127.0.0.1:{stats}" in t for t in texts)
    assert all(f"bind 127.0.0.1:{metrics}" in t for t in texts)
    listening = [c.laddr for c in psutil.net_connections("tcp") if c.status == "LISTEN"]
    on_ports = [a for a in listening if a.port in (stats, metrics)]
    assert {a.port for a in on_ports} == {stats, metrics}
    assert all(a.ip == "127.0.0.1" for a in on_ports), on_ports


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
    # written before the PUT with the version it replaced, settled once every replica ran it
    assert row.status == "applied" and row.version_after == row.version_before + 1
    assert row.outcome_at is not None and row.outcome_at >= row.changed_at
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


def test_a_change_not_confirmed_in_time_is_still_audited(routing_gateway) -> None:
    gw = routing_gateway
    set_auto(gw, SEEDS_MIX, "seeds' mix")
    version = read_live_routing(gw.dashboard_url, gw.app_name, cfg=gw.cfg).settings.version
    with pytest.raises(RoutingUpdateError, match="did not report routing version"):
        apply_routing_change(
            gw.dashboard_url,
            gw.app_name,
            "auto",
            {"gemini-2.5-flash": "1"},
            "tests",
            "unconfirmable",
            gw.database_url,
            cfg=gw.cfg,
            # nothing answers here: the replicas' confirmation never comes
            gateway_url="http://127.0.0.1:9",
            timeout_s=3,
        )
    (row,) = list_routing_changes(gw.database_url, app_name=gw.app_name, limit=1)
    assert (row.note, row.status) == ("unconfirmable", "timed_out")
    assert (row.version_before, row.version_after) == (version, version + 1)
    # it was sent, and Serve took it: the trail says so rather than nothing
    live = read_live_routing(gw.dashboard_url, gw.app_name, cfg=gw.cfg).settings
    assert live.version == version + 1
