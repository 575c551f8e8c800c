"""The batch tables, on `Base.metadata` for migrations and their check (0012)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from db.models import Base

_NOW = sa.text("now()")


def _at(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable,
                     server_default=None if nullable else _NOW)  # fmt: skip


# a file uploaded through `POST /v1/files` or written by a finished batch; its bytes live
# under `batches.files_dir`, named by id; only `app` may read it
batch_files = sa.Table(
    "batch_files",
    Base.metadata,
    sa.Column("id", sa.Text(), primary_key=True),
    sa.Column("app", sa.Text(), nullable=False),
    sa.Column("purpose", sa.Text(), nullable=False),
    sa.Column("filename", sa.Text(), nullable=False),
    sa.Column("bytes", sa.BigInteger(), nullable=False),
    _at("created_at", nullable=False),
)

# one batch (OpenAI's or Anthropic's), the provider's id for it, and what it reserved and
# cost; `lines`: [{custom_id, requested, model}] in input order, what each line is priced by
batches = sa.Table(
    "batches",
    Base.metadata,
    sa.Column("id", sa.Text(), primary_key=True),
    sa.Column("api", sa.Text(), nullable=False),  # 'openai' | 'anthropic'
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
    sa.Index("ix_batches_app_created", "app", "created_at"),
)

# which ledger row is which batch line: written with the rows, in one transaction
batch_lines = sa.Table(
    "batch_lines",
    Base.metadata,
    sa.Column("request_id", sa.Uuid(), primary_key=True),
    sa.Column("batch_id", sa.Text(), nullable=False),
    sa.Column("custom_id", sa.Text(), nullable=False),
    sa.UniqueConstraint("batch_id", "custom_id", name="uq_batch_lines_batch_custom"),
)

# one row per named lease: the replica holding it until `expires_at` polls the providers
batch_leases = sa.Table(
    "batch_leases",
    Base.metadata,
    sa.Column("name", sa.Text(), primary_key=True),
    sa.Column("holder", sa.Text(), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
)
