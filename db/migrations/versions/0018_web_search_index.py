"""a partial index on the raw rows with web searches

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05 12:55:00

What-if and the FOCUS export add web search fees per group from raw rows (the rollups do
not sum them), filtered on `web_search_calls > 0`. Without an index that read every raw
row of the period: 2.3 s for 30 days at 50,000,000 rows, where the fees' rows were none,
and the What-if page's first visit took 2.9-4.3 s (issue 29, docs/ROLLUPS.md). The
partial index holds only those rows, so the writer pays nothing for the others.

Created on the partitioned table, it is built on every week (a SHARE lock on each
while it is built: the writer waits, or spools, meanwhile) and created with every new
week after.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_usage_records_web_search_started_at"


def upgrade() -> None:
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} ON usage_records (started_at)"
        " WHERE web_search_calls > 0"
    )


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
