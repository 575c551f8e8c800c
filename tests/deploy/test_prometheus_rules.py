"""The shipped alert rules: promtool accepts them, every metric they read is one costgate
exports, the compose Prometheus loads them, and `promtool test rules` shows each alert
firing on the series that should fire it (and not on those that should not)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from gateway.alerts.budget_metrics import budget_sample_names
from gateway.metrics.catalog import exported_sample_names
from tests.deploy.repo_files import PROMETHEUS, ROOT, checkable_prometheus_config, compose

RULES = ROOT / "deploy" / "prometheus" / "rules" / "costgate.rules.yml"
REQUIRED = {
    "CostgateBudgetAt80Percent",
    "CostgateBudgetExhausted",
    "CostgateBudgetBurnRate",
    "CostgateHighErrorRate",
    "CostgateCircuitBreakerOpen",
    "CostgateLedgerWriterDown",
    "CostgateSpoolGrowing",
}


def _rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def _promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_promtool_accepts_the_rules() -> None:
    result = _promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rules_cover_budgets_errors_breakers_and_the_ledger_writer() -> None:
    assert {r["alert"] for r in _rules()} >= REQUIRED


def test_every_metric_a_rule_reads_is_exported() -> None:
    exported = exported_sample_names() | budget_sample_names()
    used = {m for r in _rules() for m in re.findall(r"costgate_[a-z_]+", r["expr"])}
    assert used and used <= exported, used - exported


def test_the_compose_prometheus_loads_the_rules(tmp_path: Path) -> None:
    prom = yaml.safe_load(PROMETHEUS.read_text())
    (pattern,) = prom["rule_files"]
    # relative to the config file, in the repository as in the container
    assert RULES in set(PROMETHEUS.parent.glob(pattern))
    mounts = {
        m.split(":")[0]: m.split(":")[1] for m in compose()["services"]["prometheus"]["volumes"]
    }
    config_dir = Path(mounts["./deploy/prometheus/prometheus.yml"]).parent
    assert mounts["./deploy/prometheus/rules"] == str(config_dir / Path(pattern).parent)
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    assert jobs["costgate-budgets"]["static_configs"][0]["targets"] == ["alerts:9108"]
    assert "9108" in compose()["services"]["alerts"]["command"]
    result = _promtool("check", "config", str(checkable_prometheus_config(tmp_path)))
    assert result.returncode == 0 and "11 rules found" in result.stdout, result.stdout


def _labels(scope_value: str, budget_id: str) -> str:
    return f'budget_id="{budget_id}",scope="app",scope_value="{scope_value}",period="day"'


SHOP, CALM = _labels("shop", "1"), _labels("calm", "2")
SHOP_ALERT = {"budget_id": "1", "scope": "app", "scope_value": "shop", "period": "day"}


def _series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


def _expect(at: str, alert: str, *labels: dict[str, str]) -> dict[str, object]:
    return {"eval_time": at, "alertname": alert, "exp_alerts": [{"exp_labels": x} for x in labels]}


BUDGET_THRESHOLDS = {
    "interval": "1m",
    "input_series": [
        _series("costgate_budget_limit_usd", SHOP, "10x30"),
        _series("costgate_budget_spent_usd", SHOP, "7x4 8.5x4 10x20"),  # 70%, 85%, 100%
    ],
    "alert_rule_test": [
        _expect("2m", "CostgateBudgetAt80Percent"),
        _expect("6m", "CostgateBudgetAt80Percent", {"severity": "warning", **SHOP_ALERT}),
        _expect("12m", "CostgateBudgetAt80Percent"),
        _expect("12m", "CostgateBudgetExhausted", {"severity": "critical", **SHOP_ALERT}),
        _expect("2m", "CostgateBudgetExhausted"),
    ],
}
# $1 a minute against $100 with most of a day left: gone long before the period ends;
# a flat spend never burns
BURN_RATE = {
    "interval": "1m",
    "input_series": [
        _series("costgate_budget_limit_usd", SHOP, "100x40"),
        _series("costgate_budget_spent_usd", SHOP, "0+1x40"),
        _series("costgate_budget_period_end_timestamp_seconds", SHOP, "86400x40"),
        _series("costgate_budget_limit_usd", CALM, "100x40"),
        _series("costgate_budget_spent_usd", CALM, "5x40"),
        _series("costgate_budget_period_end_timestamp_seconds", CALM, "86400x40"),
    ],
    "alert_rule_test": [
        _expect("10m", "CostgateBudgetBurnRate"),  # held for 15 minutes first
        _expect("20m", "CostgateBudgetBurnRate", {"severity": "warning", **SHOP_ALERT}),
    ],
}
GATEWAY = {
    "interval": "1m",
    "input_series": [
        _series("costgate_requests_total", 'status_class="2xx"', "0+90x20"),
        _series("costgate_requests_total", 'status_class="5xx"', "0+10x20"),
        _series("costgate_circuit_breaker_state", 'provider="sim",model="m1"', "0x3 1x10"),
        _series("costgate_circuit_breaker_state", 'provider="sim",model="m2"', "0x13"),
        _series("costgate_record_writer_queued_rows_total", "", "0+50x20"),
        _series("costgate_record_writer_written_rows_total", "", "0+50x5 250x15"),
        _series("costgate_record_writer_spool_rows", "", "0x2 0+40x18"),
    ],
    "alert_rule_test": [
        _expect("12m", "CostgateHighErrorRate", {"severity": "critical"}),
        _expect("2m", "CostgateCircuitBreakerOpen"),
        _expect(
            "6m",
            "CostgateCircuitBreakerOpen",
            {"severity": "warning", "provider": "sim", "model": "m1"},
        ),
        _expect("3m", "CostgateLedgerWriterDown"),
        _expect("18m", "CostgateLedgerWriterDown", {"severity": "critical"}),
        _expect("4m", "CostgateSpoolGrowing"),
        _expect("18m", "CostgateSpoolGrowing", {"severity": "warning"}),
    ],
}


def test_each_alert_fires_on_its_series_in_promtools_rule_tests(tmp_path: Path) -> None:
    # the expressions under test; annotations are templates `check rules` validates
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(doc))
    tests = tmp_path / "rules_test.yml"
    tests.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(rules)],
                "evaluation_interval": "1m",
                "tests": [BUDGET_THRESHOLDS, BURN_RATE, GATEWAY],
            }
        )
    )
    result = _promtool("test", "rules", str(tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
