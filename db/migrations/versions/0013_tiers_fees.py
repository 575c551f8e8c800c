"""service tiers and per-call tool fees on the ledger and in price versions

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 14:50:00

A request may ask for a service tier (OpenAI's `flex`, `priority`) priced apart, and a
built-in web search billed per call: each row records the tier the provider says it
served, the web search calls it reported and their fees (a part of `actual_cost`, in the
billing currency). A price version stores its tiers' prices and its fees beside its
token rates (JSON, NULL when it has none), so an export or a what-if reads them back.
The rollups do not sum them (0006 builds the rollups from the live measure list): the
FOCUS export reads calls and fees from the raw rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MONEY = sa.Numeric(20, 10)


def upgrade() -> None:
    op.add_column("usage_records", sa.Column("service_tier", sa.Text(), nullable=True))
    op.add_column("usage_records", sa.Column("web_search_calls", sa.Integer(), nullable=True))
    op.add_column("usage_records", sa.Column("tool_fee_cost", MONEY, nullable=True))
    for side in ("list", "billed"):
        op.add_column(
            "price_versions",
            sa.Column(f"{side}_extras", postgresql.JSONB(none_as_null=True), nullable=True),
        )


def downgrade() -> None:
    for side in ("list", "billed"):
        op.drop_column("price_versions", f"{side}_extras")
    op.drop_column("usage_records", "tool_fee_cost")
    op.drop_column("usage_records", "web_search_calls")
    op.drop_column("usage_records", "service_tier")
