"""The generated declarative Serve config."""

from __future__ import annotations

import copy
from pathlib import Path

from gateway.control.serve_config import serve_config
from gateway.domain.config import default_config_path, load_config, parse_config
from gateway.domain.routing_settings import parse_routing


def test_the_ingress_gets_replicas_ongoing_requests_and_routing_from_the_config(tmp_path):
    cfg = load_config(default_config_path())
    sc = serve_config(cfg, config_path=Path(default_config_path()), state_dir=tmp_path)
    (app,) = sc["applications"]
    assert app["import_path"] == "gateway.replica.ingress:build"
    assert app["name"] == "costgate" and app["route_prefix"] == "/"
    (dep,) = app["deployments"]
    assert dep["num_replicas"] == 2 and dep["max_ongoing_requests"] == 256
    assert parse_routing(dep["user_config"], cfg).aliases["auto"]["deepseek-v3.2"] == 60
    assert sc["http_options"]["port"] == 8000
    # nothing secret in what Ray's dashboard will show to anyone who can reach it
    assert "DATABASE_URL" not in str(sc) and "api_key" not in str(sc)


def test_autoscaling_replaces_a_fixed_replica_count(tmp_path):
    cfg = load_config(default_config_path())
    data = cfg.model_dump(mode="json")
    data["gateway"]["autoscaling"] = {"min_replicas": 2, "max_replicas": 5,
                                      "target_ongoing_requests": 32}
    sc = serve_config(parse_config(data), config_path=Path("c.yaml"), state_dir=tmp_path)
    (dep,) = sc["applications"][0]["deployments"]
    assert "num_replicas" not in dep
    assert dep["autoscaling_config"] == {"min_replicas": 2, "max_replicas": 5,
                                         "target_ongoing_requests": 32}


def test_replicas_get_the_configured_graceful_shutdown_sized_for_the_longest_stream(tmp_path):
    from gateway.control.serve_config import REQUEST_TIMEOUT_S
    from gateway.replica.ingress import LEDGER_CLOSE_TIMEOUT_S

    cfg = load_config(default_config_path())
    sc = serve_config(cfg, config_path=Path("c.yaml"), state_dir=tmp_path)
    (dep,) = sc["applications"][0]["deployments"]
    # the default lets the longest stream Serve allows drain, then the ledger flush
    assert dep["graceful_shutdown_timeout_s"] == cfg.gateway.graceful_shutdown_timeout_s
    assert sc["http_options"]["request_timeout_s"] == REQUEST_TIMEOUT_S
    assert dep["graceful_shutdown_timeout_s"] >= REQUEST_TIMEOUT_S + LEDGER_CLOSE_TIMEOUT_S

    data = cfg.model_dump(mode="json")
    data["gateway"]["graceful_shutdown_timeout_s"] = 60
    sc = serve_config(parse_config(data), config_path=Path("c.yaml"), state_dir=tmp_path)
    assert sc["applications"][0]["deployments"][0]["graceful_shutdown_timeout_s"] == 60


def test_a_file_edited_in_place_changes_the_apps_args_unless_only_routing_changed(tmp_path):
    """Serve replaces replicas only when an app's args change; the replicas read the
    file at start, so an edited file must show in the args, and a routing-only edit not
    (it reconfigures replicas in place, through user_config)."""
    cfg = load_config(default_config_path())

    def deployed(data: dict) -> dict:
        sc = serve_config(parse_config(data), config_path=tmp_path / "c.yaml", state_dir=tmp_path)
        return sc["applications"][0]

    base = cfg.model_dump(mode="json")
    first = deployed(base)
    assert first["args"]["config_path"] == str((tmp_path / "c.yaml").resolve())

    bigger = copy.deepcopy(base)
    bigger["gateway"]["max_body_bytes"] += 1024
    assert deployed(bigger)["args"] != first["args"]

    reweighted = copy.deepcopy(base)
    reweighted["aliases"]["auto"]["candidates"]["deepseek-v3.2"] = 1
    capped = copy.deepcopy(base)
    capped["models"][0]["rpm_limit"] = 7
    for data in (reweighted, capped):
        app = deployed(data)
        assert app["args"] == first["args"]
        assert app["deployments"][0]["user_config"] != first["deployments"][0]["user_config"]


def test_serves_own_per_request_http_metrics_are_off_unless_asked_for():
    from gateway.control.serve_config import serve_ingress_env

    data = load_config(default_config_path()).model_dump(mode="json")
    env = serve_ingress_env(parse_config(data))
    assert env["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    assert env["RAY_SERVE_HAPROXY_METRICS_ENABLED"] == "0"
    data["gateway"]["serve_http_metrics"] = True
    assert serve_ingress_env(parse_config(data))["RAY_SERVE_HAPROXY_METRICS_ENABLED"] == "1"
    data["gateway"]["ingress"] = "proxy"
    assert serve_ingress_env(parse_config(data)) == {}


def test_a_replica_shutting_down_behind_haproxy_is_held_for_the_configured_drain_period():
    from gateway.control.serve_config import serve_ingress_env

    data = load_config(default_config_path()).model_dump(mode="json")
    assert serve_ingress_env(parse_config(data))[
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] == "30"  # Serve's own
    data["gateway"]["drain_period_s"] = 12.5
    assert serve_ingress_env(parse_config(data))[
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] == "12.5"


def test_serves_shutdown_waits_for_a_replicas_drain_and_its_graceful_shutdown():
    """Serve's controller force-stopped replicas after 30 s, their drain's length: the
    ledger's last flush was cut."""
    from gateway.control.serve_config import ray_node_env

    data = load_config(default_config_path()).model_dump(mode="json")
    data["gateway"]["drain_period_s"] = 30
    data["gateway"]["graceful_shutdown_timeout_s"] = 60
    for ingress in ("haproxy", "proxy"):
        data["gateway"]["ingress"] = ingress
        env = ray_node_env(parse_config(data))
        assert env["RAY_SERVE_SHUTDOWN_TIER_TIMEOUT_S"] == "90"


def test_a_redeploy_starts_every_replacement_before_the_replicas_it_replaces_stop(tmp_path):
    from ray.serve.schema import ServeDeploySchema

    cfg = load_config(default_config_path())
    sc = serve_config(cfg, config_path=Path("c.yaml"), state_dir=tmp_path)
    (dep,) = sc["applications"][0]["deployments"]
    # all at once, with surge: the old replicas serve until the new ones run
    assert dep["rolling_update_percentage"] == 1.0 and dep["max_surge_percent"] == 100
    ServeDeploySchema.model_validate(sc)  # Serve's own schema takes them

    data = cfg.model_dump(mode="json")
    data["gateway"].update(rollout_batch_percent=25, rollout_surge_percent=0)
    sc = serve_config(parse_config(data), config_path=Path("c.yaml"), state_dir=tmp_path)
    (dep,) = sc["applications"][0]["deployments"]
    assert dep["rolling_update_percentage"] == 0.25 and dep["max_surge_percent"] == 0
    ServeDeploySchema.model_validate(sc)
