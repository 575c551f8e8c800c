"""Writes deploy/grafana/dashboards/costgate.json, the Grafana dashboard compose provisions.

The JSON is generated so that panels stay uniform and reviewable here, and the queries
sit next to each other; tests/deploy/test_grafana_dashboard.py checks that the committed
JSON is this script's output and that every metric it queries is one the gateway exports.

    python deploy/grafana/build_dashboard.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards" / "costgate.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"
MODELS = 'model=~"$model"'


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}


def _panel(
    title: str,
    targets: list[tuple[str, str]],
    *,
    unit: str = "short",
    kind: str = "timeseries",
    w: int = 12,
    h: int = 8,
    description: str = "",
    **extra: Any,
) -> dict[str, Any]:
    panel: dict[str, Any] = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [_target(e, lg, chr(ord("A") + i)) for i, (e, lg) in enumerate(targets)],
        "options": {"legend": {"displayMode": "table", "placement": "right"}}
        if kind == "timeseries"
        else {},
    }
    panel.update(extra)
    return panel


def _row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"w": 24, "h": 1}}


def _quantiles(metric: str, where: str) -> list[tuple[str, str]]:
    return [
        (
            f"histogram_quantile({q}, sum by (le, model) (rate({metric}_bucket{{{where}}}[{RI}])))",
            f"p{int(q * 100)} {{{{model}}}}",
        )
        for q in (0.5, 0.95, 0.99)
    ]


def panels() -> list[dict[str, Any]]:
    net_savings = (
        "sum(increase(costgate_savings_usd_total[$__range])) "
        "- sum(increase(costgate_negative_savings_usd_total[$__range]))"
    )
    return [
        _row("Traffic"),
        _panel(
            "Request rate by model",
            [(f"sum by (model) (rate(costgate_requests_total{{{MODELS}}}[{RI}]))", "{{model}}")],
            unit="reqps",
        ),
        _panel(
            "Error rate",
            [
                (
                    f'sum(rate(costgate_requests_total{{status_class="5xx"}}[{RI}])) '
                    f"/ sum(rate(costgate_requests_total[{RI}]))",
                    "5xx",
                ),
                (
                    f'sum(rate(costgate_requests_total{{status_class="4xx"}}[{RI}])) '
                    f"/ sum(rate(costgate_requests_total[{RI}]))",
                    "4xx",
                ),
            ],
            unit="percentunit",
            description="Share of client requests answered with an error status.",
        ),
        _panel(
            "Errors by reason",
            [
                (
                    f"sum by (reason, model) (rate(costgate_request_errors_total[{RI}]))",
                    "{{reason}} {{model}}",
                )
            ],
            unit="reqps",
        ),
        _panel(
            "Requests in flight",
            [
                ("sum(costgate_requests_in_flight)", "in flight"),
                ("sum(costgate_metrics_reporting_replicas)", "replicas reporting"),
            ],
        ),
        _row("Latency"),
        _panel(
            "Request latency p50 / p95 / p99 by model",
            _quantiles("costgate_request_duration_seconds", f'status_class="2xx",{MODELS}'),
            unit="s",
        ),
        _panel(
            "Time to first token p50 / p95 / p99 by model",
            _quantiles("costgate_time_to_first_token_seconds", MODELS),
            unit="s",
        ),
        _row("Tokens and money"),
        _panel(
            "Tokens per second",
            [
                (
                    f'sum by (kind) (rate(costgate_tokens_total{{kind=~"prompt|completion"}}'
                    f"[{RI}]))",
                    "{{kind}}",
                ),
                (
                    f'sum by (kind) (rate(costgate_tokens_total{{kind=~"cached_prompt|reasoning"}}'
                    f"[{RI}]))",
                    "{{kind}} (part of the above)",
                ),
            ],
            unit="short",
        ),
        _panel(
            "Spend per hour by provider (USD)",
            [
                (
                    f"sum by (provider) (rate(costgate_cost_usd_total[{RI}])) * 3600",
                    "{{provider}}",
                ),
                (f"sum(rate(costgate_list_cost_usd_total[{RI}])) * 3600", "at list prices"),
            ],
            unit="currencyUSD",
        ),
        _panel(
            "Spend in range",
            [
                ("sum(increase(costgate_cost_usd_total[$__range]))", "billed"),
                ("sum(increase(costgate_list_cost_usd_total[$__range]))", "at list prices"),
                ("sum(increase(costgate_baseline_cost_usd_total[$__range]))", "on baselines"),
            ],
            unit="currencyUSD",
            kind="stat",
            w=8,
        ),
        _panel(
            "Savings in range",
            [
                (net_savings, "provider price and FX"),
                (
                    "sum(increase(costgate_baseline_cost_usd_total[$__range])) "
                    "- sum(increase(costgate_list_cost_usd_total[$__range]))",
                    "routing to cheaper models",
                ),
            ],
            unit="currencyUSD",
            kind="stat",
            w=8,
            description="Savings against list prices can be negative (a relay billing "
            "above list): shown as they are.",
        ),
        _panel(
            "Savings % against list price",
            [(f"({net_savings}) / sum(increase(costgate_list_cost_usd_total[$__range]))", "")],
            unit="percentunit",
            kind="stat",
            w=8,
        ),
        _row("Routing and upstream health"),
        _panel(
            "Routing mix against weights ($alias)",
            [
                (
                    f'sum by (model) (rate(costgate_requests_total{{alias="$alias"}}[{RI}])) '
                    f'/ scalar(sum(rate(costgate_requests_total{{alias="$alias"}}[{RI}])))',
                    "actual {{model}}",
                ),
                (
                    'sum by (model) (costgate_routing_weight{alias="$alias"}) '
                    '/ scalar(sum(costgate_routing_weight{alias="$alias"}))',
                    "weight {{model}}",
                ),
            ],
            unit="percentunit",
            description="Share of the alias's requests each model answered, beside its "
            "configured weight. Fallbacks and open breakers move traffic off the weights.",
        ),
        _panel(
            "Circuit breakers",
            [("max by (provider, model) (costgate_circuit_breaker_state)", "{{model}}")],
            kind="state-timeline",
            fieldConfig={
                "defaults": {
                    "mappings": [
                        {
                            "type": "value",
                            "options": {
                                "0": {"text": "closed", "color": "green"},
                                "1": {"text": "open", "color": "red"},
                                "2": {"text": "half-open", "color": "orange"},
                            },
                        }
                    ],
                    "color": {"mode": "thresholds"},
                },
                "overrides": [],
            },
            options={},
        ),
        _panel(
            "Upstream attempts by outcome",
            [
                (
                    f"sum by (outcome) (rate(costgate_upstream_attempts_total[{RI}]))",
                    "{{outcome}}",
                ),
                (f"sum(rate(costgate_retries_total[{RI}]))", "retries"),
                (f"sum(rate(costgate_fallbacks_total[{RI}]))", "fallbacks"),
            ],
            unit="reqps",
        ),
        _panel(
            "Fallbacks",
            [
                (
                    f"sum by (from_model, to_model) (rate(costgate_fallbacks_total[{RI}]))",
                    "{{from_model}} → {{to_model}}",
                )
            ],
            unit="reqps",
        ),
        _row("Ledger writer"),
        _panel(
            "Rows per second",
            [
                (f"sum(rate(costgate_record_writer_queued_rows_total[{RI}]))", "queued"),
                (f"sum(rate(costgate_record_writer_written_rows_total[{RI}]))", "written"),
                (f"sum(rate(costgate_record_writer_spooled_rows_total[{RI}]))", "spooled"),
                (f"sum(rate(costgate_record_writer_dropped_rows_total[{RI}]))", "dropped"),
            ],
        ),
        _panel(
            "Rows waiting",
            [
                ("sum(costgate_record_writer_buffer_rows)", "in memory"),
                ("sum(costgate_record_writer_spool_rows)", "in spool files"),
                ("sum(costgate_record_writer_dropped_rows_total)", "dropped (all time)"),
            ],
            description="Rows spool to disk while PostgreSQL is away and replay when it "
            "is back; dropped should stay at 0.",
        ),
        _panel(
            "Writer faults",
            [
                ("sum(increase(costgate_record_writer_restarts_total[$__range]))",
                 "loop restarts"),
                ("sum(increase(costgate_record_writer_spool_write_errors_total[$__range]))",
                 "spool write errors"),
                ("sum(increase(costgate_record_writer_quarantined_lines_total[$__range]))",
                 "quarantined spool lines"),
            ],
            kind="stat",
            description="A loop that failed and was restarted, a spool disk that refused a "
            "write (full, read-only), spool lines that were not records (set aside in "
            "usage-quarantine-* files beside the spool): each should stay at 0.",
        ),
        _panel(
            "Requests without a known cost",
            [
                (
                    "sum by (model) (increase(costgate_unpriced_requests_total[$__range]))",
                    "{{model}}",
                )
            ],
            kind="stat",
            w=24,
            h=5,
            description="Usage missing: their cost is unknown, never counted as $0.",
        ),
    ]


def _layout(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Place panels left to right on Grafana's 24-column grid, rows on lines of their own."""
    x = y = line_h = 0
    for i, p in enumerate(items, start=1):
        p["id"] = i
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if p["type"] == "row" or x + w > 24:
            x, y, line_h = 0, y + line_h, 0
        p["gridPos"].update(x=x, y=y)
        if p["type"] == "row":
            y += h
            continue
        x += w
        line_h = max(line_h, h)
    return items


def _variable(name: str, label: str, query: str, *, multi: bool) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "multi": multi,
        "includeAll": multi,
        "allValue": ".*" if multi else None,
        "current": {},
        "sort": 1,
    }


def dashboard() -> dict[str, Any]:
    return {
        "uid": "costgate",
        "title": "costgate gateway",
        "description": "Totals over every gateway replica (the /metrics of any replica).",
        "tags": ["costgate", "llm"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {"text": "Prometheus", "value": "prometheus"},
                },
                _variable(
                    "model", "Model", "label_values(costgate_requests_total, model)", multi=True
                ),
                _variable(
                    "alias", "Alias", "label_values(costgate_routing_weight, alias)", multi=False
                ),
            ]
        },
        "annotations": {"list": []},
        "panels": _layout(panels()),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
