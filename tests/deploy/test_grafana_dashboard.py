import importlib.util
import json
import re
import subprocess

import yaml

from gateway.metrics.catalog import ALL_METRICS, exported_sample_names
from tests.deploy.repo_files import GRAFANA, compose

DASHBOARD = GRAFANA / "dashboards" / "costgate.json"
_METRIC = re.compile(r"\bcostgate_[a-z0-9_]+")
_SELECTOR = re.compile(r"\b(costgate_[a-z0-9_]+)\{([^}]*)\}")
_BY = re.compile(r"\bby \(([^)]*)\)")
_SUFFIXES = ("_total", "_bucket", "_sum", "_count")


def _panels() -> list[dict]:
    return [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def _exprs() -> list[str]:
    return [t["expr"] for p in _panels() for t in p["targets"]]


def _labels_of(sample_name: str) -> set[str]:
    for m in ALL_METRICS:
        if sample_name in m.sample_names():
            extra = {"le"} if sample_name.endswith("_bucket") else set()
            return set(m.labels) | extra
    raise AssertionError(f"{sample_name} is not exported")


def test_the_committed_json_is_what_the_generator_writes():
    spec = importlib.util.spec_from_file_location("build_dashboard", GRAFANA / "build_dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text() == module.render()


def test_every_metric_a_panel_queries_is_one_the_gateway_exports():
    exported = exported_sample_names()
    queried = {name for expr in _exprs() for name in _METRIC.findall(expr)}
    assert queried
    assert queried <= exported, queried - exported


def test_every_label_a_panel_uses_exists_on_the_metrics_it_queries():
    for expr in _exprs():
        names = set(_METRIC.findall(expr))
        labels = set().union(*(_labels_of(n) for n in names))
        for name, matchers in _SELECTOR.findall(expr):
            used = {m.split("=")[0].rstrip("!~").strip() for m in matchers.split(",") if m}
            assert used <= _labels_of(name), (expr, used - _labels_of(name))
        for group in _BY.findall(expr):
            used = {g.strip() for g in group.split(",")}
            assert used <= labels, (expr, used - labels)


def test_the_dashboard_covers_what_ops_watch():
    text = " ".join(_exprs())
    titles = " ".join(p["title"].lower() for p in _panels())
    for needed in (
        "costgate_requests_total",  # request and error rate
        "costgate_request_duration_seconds_bucket",
        "costgate_time_to_first_token_seconds_bucket",
        "costgate_tokens_total",
        "costgate_cost_usd_total",
        "costgate_savings_usd_total",
        "costgate_routing_weight",
        "costgate_circuit_breaker_state",
        "costgate_record_writer_dropped_rows_total",
        "costgate_record_writer_spool_rows",
    ):
        assert needed in text, needed
    for q in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({q}" in text
    for word in ("error rate", "spend per hour", "savings", "routing mix", "breaker"):
        assert word in titles, word


def test_promtool_parses_every_panel_query(tmp_path):
    def concrete(expr: str) -> str:
        for var, value in {
            "$__rate_interval": "1m",
            "$__range": "1h",
            "$alias": "auto",
            "$model": ".*",
        }.items():
            expr = expr.replace(var, value)
        return expr

    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:panel_{i}", "expr": concrete(e)}
                    for i, e in enumerate(_exprs())
                ],
            }
        ]
    }
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_provisions_the_datasource_and_the_dashboard_the_json_uses():
    grafana = compose()["services"]["grafana"]
    mounts = {m.split(":")[0]: m.split(":")[1] for m in grafana["volumes"]}
    provisioning = GRAFANA / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    (ds,) = datasources["datasources"]
    assert ds["type"] == "prometheus"
    assert ds["url"] == "http://prometheus:9090"
    dashboard = json.loads(DASHBOARD.read_text())
    variable = next(v for v in dashboard["templating"]["list"] if v["type"] == "datasource")
    assert variable["current"]["value"] == ds["uid"]
    providers = yaml.safe_load((provisioning / "dashboards" / "costgate.yml").read_text())
    (provider,) = providers["providers"]
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
