"""The budget gauges as Prometheus text: one series per budget with bounded labels, read
back with prometheus_client's own parser."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from prometheus_client.parser import text_string_to_metric_families

from db.budget_alerts import BudgetFigures
from gateway.alerts.budget_metrics import (
    BUDGET_METRICS,
    MAX_BUDGETS,
    budget_sample_names,
    render_budgets,
)
from gateway.domain.budgets import Budget, BudgetPeriod, BudgetScope
from gateway.metrics.catalog import exported_sample_names

START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def figures(bid: int, scope_value: str = "shop", **kw: object) -> BudgetFigures:
    budget = Budget(bid, BudgetScope.APP, scope_value, BudgetPeriod.DAY, Decimal("0.02"), True)
    return BudgetFigures(
        budget,
        START,
        START + dt.timedelta(days=1),
        Decimal(str(kw.get("spent", "0.017"))),
        Decimal(str(kw.get("reserved", "0.001"))),
    )


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_each_budget_exports_its_limit_spent_reserved_and_period_end() -> None:
    got = samples(render_budgets([figures(7)], last_success=1234.5, webhooks={"sent": 2}))
    labels = (("budget_id", "7"), ("period", "day"), ("scope", "app"), ("scope_value", "shop"))
    assert got[("costgate_budget_limit_usd", labels)] == 0.02
    assert got[("costgate_budget_spent_usd", labels)] == 0.017
    assert got[("costgate_budget_reserved_usd", labels)] == 0.001
    assert got[("costgate_budget_hard", labels)] == 1
    end = (START + dt.timedelta(days=1)).timestamp()
    assert got[("costgate_budget_period_end_timestamp_seconds", labels)] == end
    assert got[("costgate_budget_watch_last_success_timestamp_seconds", ())] == 1234.5
    assert got[("costgate_budget_webhooks_total", (("outcome", "sent"),))] == 2
    assert got[("costgate_budget_webhooks_total", (("outcome", "failed"),))] == 0


def test_free_text_in_a_scope_value_is_not_exported_and_the_series_count_is_capped() -> None:
    got = samples(render_budgets([figures(1, 'bad "name"\nwith text')]))
    values = {
        dict(lbl)["scope_value"] for (name, lbl) in got if name == "costgate_budget_spent_usd"
    }
    assert values == {"other"}
    many = [figures(i) for i in range(MAX_BUDGETS + 50)]
    got = samples(render_budgets(many))
    assert sum(1 for (name, _) in got if name == "costgate_budget_limit_usd") == MAX_BUDGETS


def test_every_family_is_present_without_budgets_and_names_do_not_clash() -> None:
    names = {f.name for f in text_string_to_metric_families(render_budgets([]).decode())}
    assert names == {m.name for m in BUDGET_METRICS}
    assert not budget_sample_names() & exported_sample_names()
