"""end users, sessions and tags on the ledger; their rollups, budgets and erasure

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 08:00:00

`usage_records` gains `end_user`, `session_id` and `tags` (JSONB), NULL on rows written
before (they served nobody below the key). Three daily rollups by end user, tag and
session (`db.analytics.attribution_sql`), kept by the same statement trigger: the rollup
functions are replaced by their current version, and the new rollups start empty (the
rows before this revision carry no attribution). Keys gain default tags, a set of allowed
tag keys and per-end-user rate limits; budgets two scopes (`each_user`, `tag`), whose
leases are held per subject (the end user); erasures are audited.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from db.analytics import attribution_sql, rollup_sql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_SCOPES = "scope IN ('app', 'team', 'key', 'all')"
NEW_SCOPES = "scope IN ('app', 'team', 'key', 'all', 'each_user', 'tag')"


def _rollup(name: str) -> None:
    not_null = attribution_sql.NOT_NULL[name]
    op.create_table(
        name,
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        *(sa.Column(d, sa.Text(), nullable=d not in not_null)
          for d in attribution_sql.DIMENSIONS[name]),
        *(sa.Column(c, sa.BigInteger(), nullable=False, server_default=sa.text("0"))
          for c in attribution_sql.COUNT_NAMES),
        *(sa.Column(m, sa.Numeric()) for m in attribution_sql.MONEY_NAMES),
    )  # fmt: skip
    op.create_index(f"ux_{name}_key", name, list(attribution_sql.key(name)), unique=True,
                    postgresql_nulls_not_distinct=True)  # fmt: skip


def upgrade() -> None:
    op.add_column("usage_records", sa.Column("end_user", sa.Text(), nullable=True))
    op.add_column("usage_records", sa.Column("session_id", sa.Text(), nullable=True))
    op.add_column("usage_records", sa.Column("tags", postgresql.JSONB(), nullable=True))
    op.create_index(
        "ix_usage_records_end_user_started_at",
        "usage_records",
        ["end_user", "started_at"],
        postgresql_where=sa.text("end_user IS NOT NULL"),
    )
    for name in attribution_sql.TABLES:
        _rollup(name)
    op.execute(attribution_sql.rank_index_sql())
    for statement in rollup_sql.function_sql(keyed=False, kinds_closed=False):
        op.execute(statement)
    op.create_table(
        "end_user_erasures",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),  # fmt: skip
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("tombstone", sa.Text(), nullable=False),
        sa.Column("ledger_rows", sa.BigInteger(), nullable=False),
        sa.Column("rollup_rows", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_end_user_erasures")),
    )
    op.add_column("api_keys", sa.Column("default_tags", postgresql.JSONB(), nullable=True))
    op.add_column("api_keys", sa.Column("allowed_tag_keys", postgresql.JSONB(), nullable=True))
    op.add_column("api_keys", sa.Column("user_rpm_limit", sa.Integer(), nullable=True))
    op.add_column("api_keys", sa.Column("user_tpm_limit", sa.Integer(), nullable=True))
    op.drop_constraint(op.f("ck_budgets_scope"), "budgets", type_="check")
    op.create_check_constraint(op.f("ck_budgets_scope"), "budgets", NEW_SCOPES)
    op.add_column("budget_leases", sa.Column("subject", sa.Text(), server_default=sa.text("''"),
                                             nullable=False))  # fmt: skip
    op.drop_constraint(op.f("pk_budget_leases"), "budget_leases", type_="primary")
    op.create_primary_key(op.f("pk_budget_leases"), "budget_leases",
                          ["budget_id", "period_start", "subject", "holder"])  # fmt: skip


def downgrade() -> None:
    op.drop_constraint(op.f("pk_budget_leases"), "budget_leases", type_="primary")
    op.execute("DELETE FROM budget_leases WHERE subject <> ''")
    op.create_primary_key(op.f("pk_budget_leases"), "budget_leases",
                          ["budget_id", "period_start", "holder"])  # fmt: skip
    op.drop_column("budget_leases", "subject")
    op.execute("DELETE FROM budgets WHERE scope IN ('each_user', 'tag')")
    op.drop_constraint(op.f("ck_budgets_scope"), "budgets", type_="check")
    op.create_check_constraint(op.f("ck_budgets_scope"), "budgets", OLD_SCOPES)
    for column in ("user_tpm_limit", "user_rpm_limit", "allowed_tag_keys", "default_tags"):
        op.drop_column("api_keys", column)
    op.drop_table("end_user_erasures")
    for statement in rollup_sql.function_sql(attribution=False, keyed=False):
        op.execute(statement)
    for name in reversed(attribution_sql.TABLES):
        op.drop_table(name)
    op.drop_index("ix_usage_records_end_user_started_at", table_name="usage_records")
    for column in ("tags", "session_id", "end_user"):
        op.drop_column("usage_records", column)
