"""response-cache hits and context trimming on each ledger row

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 12:00:00

A request answered from the gateway's response cache is a row of its own: `cache_hit` marks
it (actual cost 0, list and baseline cost as if served, so the dashboard can count the
difference as "cache" savings). `trimmed_tokens` is how many prompt tokens context trimming
dropped before the request went upstream (NULL: not trimmed).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "usage_records",
        sa.Column("cache_hit", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.add_column("usage_records", sa.Column("trimmed_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("usage_records", "trimmed_tokens")
    op.drop_column("usage_records", "cache_hit")
