"""ledger tables

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-29 15:41:19.763530
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "price_versions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("upstream_model", sa.Text(), nullable=False),
        sa.Column("effective_from", sa.Date(), nullable=False),
        sa.Column("list_input", sa.Numeric(precision=20, scale=10), nullable=False),
        sa.Column("list_cached_input", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column("list_cache_write", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column("list_output", sa.Numeric(precision=20, scale=10), nullable=False),
        sa.Column("list_reasoning", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column(
            "list_tiers",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("billing_rule", sa.Text(), nullable=False),
        sa.Column("billing_currency", sa.Text(), nullable=False),
        sa.Column("fx_per_usd", sa.Numeric(precision=20, scale=10), nullable=False),
        sa.Column("multiplier", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column("billed_input", sa.Numeric(precision=20, scale=10), nullable=False),
        sa.Column("billed_cached_input", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column("billed_cache_write", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column("billed_output", sa.Numeric(precision=20, scale=10), nullable=False),
        sa.Column("billed_reasoning", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column(
            "billed_tiers",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "billing_rule IN ('multiplier', 'price_table')",
            name=op.f("ck_price_versions_billing_rule"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_price_versions")),
    )
    op.create_index(
        "ix_price_versions_provider_model",
        "price_versions",
        ["provider", "model", "effective_from"],
        unique=False,
    )
    op.create_table(
        "provider_billing",
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("currency", sa.Text(), nullable=False),
        sa.Column("fx_per_usd", sa.Numeric(precision=20, scale=10), nullable=False),
        sa.Column("multiplier", sa.Numeric(precision=20, scale=10), nullable=False),
        sa.Column(
            "price_table",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("provider", name=op.f("pk_provider_billing")),
    )
    op.create_table(
        "routing_changes",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column(
            "changed_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("app_name", sa.Text(), nullable=False),
        sa.Column("alias", sa.Text(), nullable=True),
        sa.Column("before", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("after", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_routing_changes")),
    )
    op.create_index(
        "ix_routing_changes_changed_at", "routing_changes", ["changed_at"], unique=False
    )
    op.create_table(
        "teams",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
        sa.UniqueConstraint("name", name=op.f("uq_teams_name")),
    )
    op.create_table(
        "usage_records",
        sa.Column("request_id", sa.Uuid(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("app", sa.Text(), nullable=False),
        sa.Column("team", sa.Text(), nullable=True),
        sa.Column("key_id", sa.Uuid(), nullable=True),
        sa.Column("requested_model", sa.Text(), nullable=False),
        sa.Column("alias", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("provider", sa.Text(), nullable=True),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=False),
        sa.Column("error_class", sa.Text(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("cached_prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("reasoning_tokens", sa.Integer(), nullable=True),
        sa.Column("usage_source", sa.Text(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("ttft_ms", sa.Integer(), nullable=True),
        sa.Column("upstream_latency_ms", sa.Integer(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column(
            "fallback_path",
            sa.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
        sa.Column("routing_policy", sa.Text(), nullable=True),
        sa.Column("price_version_id", sa.Uuid(), nullable=True),
        sa.Column("billing_currency", sa.Text(), nullable=True),
        sa.Column("actual_cost", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column("actual_cost_usd", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column("list_cost_usd", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.Column("baseline_model", sa.Text(), nullable=True),
        sa.Column("baseline_cost_usd", sa.Numeric(precision=20, scale=10), nullable=True),
        sa.CheckConstraint(
            "status IN ('ok', 'client_error', 'upstream_error', 'cancelled')",
            name=op.f("ck_usage_records_status"),
        ),
        sa.CheckConstraint(
            "usage_source IN ('provider', 'estimated', 'missing')",
            name=op.f("ck_usage_records_usage_source"),
        ),
        sa.PrimaryKeyConstraint("request_id", name=op.f("pk_usage_records")),
    )
    op.create_index(
        "ix_usage_records_app_started_at", "usage_records", ["app", "started_at"], unique=False
    )
    op.create_index(
        "ix_usage_records_model_started_at", "usage_records", ["model", "started_at"], unique=False
    )
    op.create_index(
        "ix_usage_records_provider_started_at",
        "usage_records",
        ["provider", "started_at"],
        unique=False,
    )
    op.create_index("ix_usage_records_started_at", "usage_records", ["started_at"], unique=False)
    op.create_table(
        "apps",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("team_id", sa.Uuid(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], name=op.f("fk_apps_team_id_teams")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_apps")),
        sa.UniqueConstraint("name", name=op.f("uq_apps_name")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("app_id", sa.Uuid(), nullable=False),
        sa.Column("key_hash", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], name=op.f("fk_api_keys_app_id_apps")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_table("apps")
    op.drop_index("ix_usage_records_started_at", table_name="usage_records")
    op.drop_index("ix_usage_records_provider_started_at", table_name="usage_records")
    op.drop_index("ix_usage_records_model_started_at", table_name="usage_records")
    op.drop_index("ix_usage_records_app_started_at", table_name="usage_records")
    op.drop_table("usage_records")
    op.drop_table("teams")
    op.drop_index("ix_routing_changes_changed_at", table_name="routing_changes")
    op.drop_table("routing_changes")
    op.drop_table("provider_billing")
    op.drop_index("ix_price_versions_provider_model", table_name="price_versions")
    op.drop_table("price_versions")
