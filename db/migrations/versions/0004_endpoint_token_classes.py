"""the endpoint each request called, and its cache-write tokens

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 10:45:00

Embeddings, Responses, legacy completions and Anthropic's Messages now pass through the
gateway: each row names the API it came in by (rows before this revision were all chat
completions, hence the default), and the prompt tokens written to a provider's cache
(Anthropic bills them above the input rate) get a column of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ENDPOINTS = ("chat.completions", "completions", "embeddings", "responses", "messages")


def upgrade() -> None:
    op.add_column(
        "usage_records",
        sa.Column(
            "endpoint", sa.Text(), server_default=sa.text("'chat.completions'"), nullable=False
        ),
    )
    op.add_column("usage_records", sa.Column("cache_write_tokens", sa.Integer(), nullable=True))
    op.create_check_constraint(
        op.f("ck_usage_records_endpoint"),
        "usage_records",
        "endpoint IN (" + ", ".join(repr(s) for s in ENDPOINTS) + ")",
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_usage_records_endpoint"), "usage_records", type_="check")
    op.drop_column("usage_records", "cache_write_tokens")
    op.drop_column("usage_records", "endpoint")
