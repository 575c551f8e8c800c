"""budgets, their audit trail, alert bookkeeping, leases; per-key rpm and tpm

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 10:45:00

A budget limits what an app, a team, a key or the whole gateway may spend per UTC day,
week or month. Replicas enforce it by leasing slices of what is left (`budget_leases`)
and rate limits by taking slices out of shared token buckets (`limit_buckets`), so no
request waits for the database (docs/BUDGETS.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCOPES = ("app", "team", "key", "all")
PERIODS = ("day", "week", "month")
MONEY = sa.Numeric(20, 10)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _now(name: str) -> sa.Column[sa.DateTime]:
    return sa.Column(
        name, sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
    )


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("rpm_limit", sa.Integer(), nullable=True))
    op.add_column("api_keys", sa.Column("tpm_limit", sa.Integer(), nullable=True))
    op.create_table(
        "budgets",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("scope_value", sa.Text(), nullable=False),
        sa.Column("period", sa.Text(), nullable=False),
        sa.Column("limit_usd", MONEY, nullable=False),
        sa.Column("hard", sa.Boolean(), nullable=False),
        sa.Column("alert_at", postgresql.ARRAY(sa.Integer()), nullable=False),
        _now("created_at"),
        _now("updated_at"),
        sa.CheckConstraint(_in("scope", SCOPES), name=op.f("ck_budgets_scope")),
        sa.CheckConstraint(_in("period", PERIODS), name=op.f("ck_budgets_period")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budgets")),
        sa.UniqueConstraint(
            "scope", "scope_value", "period", name=op.f("uq_budgets_scope_scope_value_period")
        ),
    )
    op.create_table(
        "budget_changes",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("budget_id", sa.BigInteger(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("scope_value", sa.Text(), nullable=False),
        sa.Column("period", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        _now("changed_at"),
        sa.Column("before", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("after", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_changes")),
    )
    op.create_index("ix_budget_changes_changed_at", "budget_changes", ["changed_at"])
    op.create_table(
        "budget_alerts",
        sa.Column("budget_id", sa.BigInteger(), nullable=False),
        sa.Column("period_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("threshold", sa.Integer(), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.ForeignKeyConstraint(
            ["budget_id"],
            ["budgets.id"],
            name=op.f("fk_budget_alerts_budget_id_budgets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "budget_id", "period_start", "threshold", name=op.f("pk_budget_alerts")
        ),
    )
    op.create_table(
        "budget_leases",
        sa.Column("budget_id", sa.BigInteger(), nullable=False),
        sa.Column("period_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("held_usd", MONEY, server_default=sa.text("0"), nullable=False),
        sa.Column("settled_usd", MONEY, server_default=sa.text("0"), nullable=False),
        _now("created_at"),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["budget_id"],
            ["budgets.id"],
            name=op.f("fk_budget_leases_budget_id_budgets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "budget_id", "period_start", "holder", name=op.f("pk_budget_leases")
        ),
    )
    op.create_table(
        "limit_buckets",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("level", sa.Numeric(20, 6), nullable=False),
        _now("updated_at"),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_limit_buckets")),
    )


def downgrade() -> None:
    op.drop_table("limit_buckets")
    op.drop_table("budget_leases")
    op.drop_table("budget_alerts")
    op.drop_index("ix_budget_changes_changed_at", table_name="budget_changes")
    op.drop_table("budget_changes")
    op.drop_table("budgets")
    op.drop_column("api_keys", "tpm_limit")
    op.drop_column("api_keys", "rpm_limit")
