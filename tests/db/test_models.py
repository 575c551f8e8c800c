"""The usage table is the UsageRecord contract: one column per field, same names."""

from __future__ import annotations

import dataclasses

import db.analytics  # noqa: F401 - the rollup tables are on Base.metadata too
import db.batches.tables  # noqa: F401 - and the batch tables
import db.quality  # noqa: F401 - the feedback tables too
import db.shared_state.provider_objects  # noqa: F401 - and the provider objects' owners
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
        # end users, tags and sessions: their daily rollups, erasures (docs/ATTRIBUTION.md)
        "usage_rollup_user_daily",
        "usage_rollup_tag_daily",
        "usage_rollup_session_daily",
        "usage_rollup_user_kind_daily",
        "end_user_erasures",
        # provider objects bound to the app that created them (gateway.replica.objects)
        "provider_objects",
        # the response cache shared by the replicas (docs/CACHE.md)
        "response_cache",
        # feedback on requests and every score given (docs/QUALITY.md)
        "feedback",
        "feedback_changes",
        "feedback_rollup_daily",
        # files, batches, which ledger row is which batch line, the poll lease (BATCHES.md)
        "batch_files",
        "batches",
        "batch_lines",
        "batch_leases",
    }


def test_the_raw_ledger_keeps_only_the_indexes_its_readers_need() -> None:
    """Time ranges, app budgets and end users (budgets, erasure): slices by model or
    provider are the rollups' (each raw index costs the writer time on every row)."""
    indexed = {tuple(c.name for c in ix.columns) for ix in UsageRow.__table__.indexes}
    assert {("started_at",), ("app", "started_at")} <= indexed
    dropped = {("model", "started_at"), ("provider", "started_at")}
    assert not dropped & indexed
