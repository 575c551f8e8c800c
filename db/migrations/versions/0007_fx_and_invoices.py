"""dated FX rates and imported provider invoices

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 14:00:00

`fx_rates`: units of a currency per USD from a date on (the rate in force on a day is the
latest one on or before it). New requests are priced at the rate in force on their day;
price versions already stored keep theirs (docs/FINANCE.md).

`invoice_lines`: a provider's usage or cost export, one row per (day, model, line) as
imported, in the provider's currency, compared with the ledger by `costgate reconcile`.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MONEY = sa.Numeric(20, 10)


def upgrade() -> None:
    op.create_table(
        "fx_rates",
        sa.Column("currency", sa.Text(), nullable=False),
        sa.Column("effective_from", sa.Date(), nullable=False),
        sa.Column("per_usd", MONEY, nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("per_usd > 0", name=op.f("ck_fx_rates_positive")),
        sa.PrimaryKeyConstraint("currency", "effective_from", name=op.f("pk_fx_rates")),
    )
    op.create_table(
        "invoice_lines",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("import_id", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("amount", MONEY, nullable=False),
        sa.Column("currency", sa.Text(), nullable=False),
        sa.Column(
            "imported_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_invoice_lines")),
    )
    op.create_index(
        "ix_invoice_lines_provider_day", "invoice_lines", ["provider", "day"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_invoice_lines_provider_day", table_name="invoice_lines")
    op.drop_table("invoice_lines")
    op.drop_table("fx_rates")
