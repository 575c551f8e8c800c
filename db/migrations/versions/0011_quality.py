"""quality beside cost: feedback on requests, quality signals and experiments on the ledger

Revision ID: 0011
Revises: 0008
Create Date: 2026-12-04 11:00:00

`usage_records` gains the automatic quality signals (`finish_reason`, `refusal`,
`json_valid`, `tool_args_valid`) and the experiment and variant a request was routed by,
NULL on rows written before (nothing was measured). `feedback` keeps one score per
request and rater (the last one), `feedback_changes` every score given, and
`feedback_rollup_daily` their sums per day, app and model, kept by a row trigger
(docs/QUALITY.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from db.quality.tables import FEEDBACK_ROLLUP_SQL

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROW_COLUMNS = (
    ("finish_reason", sa.Text()),
    ("refusal", sa.Boolean()),
    ("json_valid", sa.Boolean()),
    ("tool_args_valid", sa.Boolean()),
    ("experiment", sa.Text()),
    ("variant", sa.Text()),
)


def upgrade() -> None:
    for name, type_ in ROW_COLUMNS:
        op.add_column("usage_records", sa.Column(name, type_, nullable=True))
    op.create_index(
        "ix_usage_records_experiment_variant",
        "usage_records",
        ["experiment", "variant"],
        postgresql_where=sa.text("experiment IS NOT NULL"),
    )
    score = sa.Numeric(5, 4)
    op.create_table(
        "feedback",
        sa.Column("request_id", sa.Uuid(), nullable=False),
        sa.Column("rater", sa.Text(), nullable=False),
        sa.Column("app", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("score", score, nullable=False),
        sa.Column("labels", postgresql.JSONB(), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),  # fmt: skip
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),  # fmt: skip
        sa.CheckConstraint("score >= 0 AND score <= 1", name=op.f("ck_feedback_score")),
        sa.PrimaryKeyConstraint("request_id", "rater", name=op.f("pk_feedback")),
    )
    op.create_index("ix_feedback_updated_at", "feedback", ["updated_at"])
    op.create_table(
        "feedback_changes",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("request_id", sa.Uuid(), nullable=False),
        sa.Column("rater", sa.Text(), nullable=False),
        sa.Column("score", score, nullable=False),
        sa.Column("labels", postgresql.JSONB(), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),  # fmt: skip
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback_changes")),
    )
    op.create_index("ix_feedback_changes_request_id", "feedback_changes", ["request_id"])
    op.create_table(
        "feedback_rollup_daily",
        sa.Column("bucket", sa.Date(), nullable=False),
        sa.Column("app", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("ratings", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("score_sum", sa.Numeric(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("bucket", "app", "model", name=op.f("pk_feedback_rollup_daily")),
    )
    for statement in FEEDBACK_ROLLUP_SQL:
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS feedback_rollup ON feedback")
    op.execute("DROP FUNCTION IF EXISTS feedback_rollup()")
    op.drop_table("feedback_rollup_daily")
    op.drop_table("feedback_changes")
    op.drop_table("feedback")
    op.drop_index("ix_usage_records_experiment_variant", table_name="usage_records")
    for name, _ in reversed(ROW_COLUMNS):
        op.drop_column("usage_records", name)
