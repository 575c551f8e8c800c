"""The usage table is the UsageRecord contract: one column per field, same names."""

from __future__ import annotations

import dataclasses

import db.analytics  # noqa: F401 - the rollup tables are on Base.metadata too
from db.models import Base, UsageRow
from gateway.domain.usage_record import UsageRecord


def test_usage_records_has_one_column_per_usage_record_field_in_order() -> None:
    fields = [f.name for f in dataclasses.fields(UsageRecord)]
    assert [c.name for c in UsageRow.__table__.columns] == fields


def test_table_names_are_the_agreed_ones() -> None:
    assert set(Base.metadata.tables) == {
        "usage_records",
        "price_versions",
        "provider_billing",
        "teams",
        "apps",
        "api_keys",
        "routing_changes",
        "budgets",
        "budget_changes",
        "budget_alerts",
        "budget_leases",
        "limit_buckets",
        # the ledger's rollups (db.analytics.rollup_tables, docs/ROLLUPS.md)
        "usage_rollup_hourly",
        "usage_rollup_daily",
        "latency_rollup_hourly",
        "latency_rollup_daily",
        "usage_rollup_state",
        # dated FX and imported invoices (docs/FINANCE.md)
        "fx_rates",
        "invoice_lines",
    }


def test_the_dashboards_time_range_indexes_exist() -> None:
    indexed = {tuple(c.name for c in ix.columns) for ix in UsageRow.__table__.indexes}
    assert {
        ("started_at",),
        ("app", "started_at"),
        ("model", "started_at"),
        ("provider", "started_at"),
    } <= indexed
