"""The budget gauges, as Prometheus text: limit, spent and reserved per budget, the
period's end (for burn-rate rules), and the watch loop's own health.

Labels: `budget_id`, `scope`, `scope_value` (an app or team name, a key's id, never a
key), `period`. Cardinality is the number of budgets, which finance creates by hand; it
is still capped (`MAX_BUDGETS`, oldest ids first) and a scope value that does not look
like a name is exported as "other", so a bad row can neither blow up the series count
nor put free text in a label. Dollars are rendered from exact Decimals; only the text
format's floats round.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from db.budget_alerts import BudgetFigures
from gateway.metrics.catalog import Kind, MetricDef

MAX_BUDGETS = 1000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,79}$")
_LABELS = ("budget_id", "scope", "scope_value", "period")

BUDGET_LIMIT = MetricDef(
    "costgate_budget_limit_usd", Kind.GAUGE,
    "A budget's limit for its period, in USD of what the providers bill.", _LABELS,
)  # fmt: skip
BUDGET_SPENT = MetricDef(
    "costgate_budget_spent_usd", Kind.GAUGE,
    "What the ledger says the budget's scope spent in the current period, in USD.", _LABELS,
)  # fmt: skip
BUDGET_RESERVED = MetricDef(
    "costgate_budget_reserved_usd", Kind.GAUGE,
    "What replicas hold leased against the budget now (in flight and free slices), in USD.",
    _LABELS,
)  # fmt: skip
BUDGET_PERIOD_END = MetricDef(
    "costgate_budget_period_end_timestamp_seconds", Kind.GAUGE,
    "When the budget's current period ends (Unix seconds, UTC calendar).", _LABELS,
)  # fmt: skip
BUDGET_HARD = MetricDef(
    "costgate_budget_hard", Kind.GAUGE,
    "1 if the budget refuses requests past its limit, 0 if it only alerts.", _LABELS,
)  # fmt: skip
WATCH_LAST_SUCCESS = MetricDef(
    "costgate_budget_watch_last_success_timestamp_seconds", Kind.GAUGE,
    "When the budget watch last read every budget's figures (Unix seconds).",
)  # fmt: skip
WATCH_WEBHOOKS = MetricDef(
    "costgate_budget_webhooks", Kind.COUNTER,
    "Budget threshold webhooks by outcome: sent, or failed (one per failed round).",
    ("outcome",),
)  # fmt: skip

BUDGET_METRICS: tuple[MetricDef, ...] = (
    BUDGET_LIMIT, BUDGET_SPENT, BUDGET_RESERVED, BUDGET_PERIOD_END, BUDGET_HARD,
    WATCH_LAST_SUCCESS, WATCH_WEBHOOKS,
)  # fmt: skip


def budget_sample_names() -> frozenset[str]:
    return frozenset(n for m in BUDGET_METRICS for n in m.sample_names())


def budget_labels(figures: BudgetFigures) -> list[str]:
    b = figures.budget
    value = b.scope_value if not b.scope_value or _NAME.match(b.scope_value) else "other"
    return [str(b.id), b.scope.value, value, b.period.value]


class BudgetCollector(Collector):
    def __init__(
        self,
        figures: Sequence[BudgetFigures],
        last_success: float | None,
        webhooks: dict[str, int],
    ) -> None:
        self._figures = sorted(figures, key=lambda f: f.budget.id)[:MAX_BUDGETS]
        self._last_success = last_success
        self._webhooks = webhooks

    def collect(self) -> Iterator[Metric]:
        for metric in (BUDGET_LIMIT, BUDGET_SPENT, BUDGET_RESERVED, BUDGET_PERIOD_END, BUDGET_HARD):
            family = GaugeMetricFamily(metric.name, metric.help, labels=list(metric.labels))
            for f in self._figures:
                family.add_metric(budget_labels(f), _value(metric, f))
            yield family
        health = GaugeMetricFamily(WATCH_LAST_SUCCESS.name, WATCH_LAST_SUCCESS.help)
        if self._last_success is not None:
            health.add_metric([], self._last_success)
        yield health
        sent = CounterMetricFamily(WATCH_WEBHOOKS.name, WATCH_WEBHOOKS.help, labels=["outcome"])
        for outcome in ("sent", "failed"):
            sent.add_metric([outcome], float(self._webhooks.get(outcome, 0)))
        yield sent


def _value(metric: MetricDef, f: BudgetFigures) -> float:
    if metric is BUDGET_LIMIT:
        return float(f.budget.limit_usd)
    if metric is BUDGET_SPENT:
        return float(f.spent_usd)
    if metric is BUDGET_RESERVED:
        return float(f.reserved_usd)
    if metric is BUDGET_PERIOD_END:
        return f.period_end.timestamp()
    return 1.0 if f.budget.hard else 0.0


def render_budgets(
    figures: Sequence[BudgetFigures],
    last_success: float | None = None,
    webhooks: dict[str, int] | None = None,
) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BudgetCollector(figures, last_success, webhooks or {}))
    return generate_latest(registry)
