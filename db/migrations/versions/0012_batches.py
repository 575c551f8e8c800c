"""the Files, Batch and Message Batches APIs: files, batches, batch lines, the poll lease

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 14:00:00

A batch's lines reach the ledger as rows of their own, with endpoint `batch`
(docs/BATCHES.md); `batch_lines` names each row's batch and custom id.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ENDPOINTS = ("chat.completions", "completions", "embeddings", "responses", "messages", "batch")
BEFORE = ENDPOINTS[:-1]


def _endpoint_check(endpoints: tuple[str, ...]) -> None:
    op.drop_constraint(op.f("ck_usage_records_endpoint"), "usage_records", type_="check")
    op.create_check_constraint(
        op.f("ck_usage_records_endpoint"),
        "usage_records",
        "endpoint IN (" + ", ".join(repr(s) for s in endpoints) + ")",
    )


def _at(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable,
                     server_default=None if nullable else sa.text("now()"))  # fmt: skip


def upgrade() -> None:
    _endpoint_check(ENDPOINTS)
    op.create_table(
        "batch_files",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("app", sa.Text(), nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("filename", sa.Text(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        _at("created_at", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batch_files")),
    )
    op.create_table(
        "batches",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("api", sa.Text(), nullable=False),
        sa.Column("app", sa.Text(), nullable=False),
        sa.Column("team", sa.Text(), nullable=True),
        sa.Column("key_id", sa.Uuid(), nullable=True),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("provider_batch_id", sa.Text(), nullable=False),
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("completion_window", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("input_file_id", sa.Text(), nullable=True),
        sa.Column("output_file_id", sa.Text(), nullable=True),
        sa.Column("error_file_id", sa.Text(), nullable=True),
        sa.Column("lines", JSONB(), nullable=False),
        sa.Column("metadata", JSONB(), nullable=True),
        sa.Column("completed_lines", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("failed_lines", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("reserved_usd", sa.Numeric(20, 10), nullable=True),
        sa.Column("billed_usd", sa.Numeric(20, 10), nullable=True),
        sa.Column("list_usd", sa.Numeric(20, 10), nullable=True),
        _at("created_at", nullable=False),
        _at("cancelling_at"),
        _at("ended_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
    )
    op.create_index("ix_batches_app_created", "batches", ["app", "created_at"])
    op.create_table(
        "batch_lines",
        sa.Column("request_id", sa.Uuid(), nullable=False),
        sa.Column("batch_id", sa.Text(), nullable=False),
        sa.Column("custom_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("request_id", name=op.f("pk_batch_lines")),
        sa.UniqueConstraint("batch_id", "custom_id", name="uq_batch_lines_batch_custom"),
    )
    op.create_table(
        "batch_leases",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_batch_leases")),
    )


def downgrade() -> None:
    op.drop_table("batch_leases")
    op.drop_table("batch_lines")
    op.drop_index("ix_batches_app_created", table_name="batches")
    op.drop_table("batches")
    op.drop_table("batch_files")
    op.execute("DELETE FROM usage_records WHERE endpoint = 'batch'")
    _endpoint_check(BEFORE)
