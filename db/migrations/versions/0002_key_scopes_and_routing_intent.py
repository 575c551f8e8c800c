"""key scopes, admin keys, expiry; routing changes audited as intent then outcome

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 07:30:00

A key may be limited to some models and aliases, to a largest `n` and output-token cap,
and to a date; an admin key reaches the administrative and reporting endpoints. A
routing change is written before the PUT (status `pending`, with the settings version it
expects to replace) and updated with its outcome, so a change whose rollout timed out is
still audited.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROUTING_STATUSES = ("pending", "applied", "failed", "timed_out")


def upgrade() -> None:
    op.add_column(
        "api_keys",
        sa.Column("allowed_models", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )
    op.add_column("api_keys", sa.Column("max_n", sa.Integer(), nullable=True))
    op.add_column("api_keys", sa.Column("max_output_tokens", sa.Integer(), nullable=True))
    op.add_column("api_keys", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "api_keys",
        sa.Column("is_admin", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.add_column(
        "routing_changes",
        sa.Column("status", sa.Text(), server_default=sa.text("'applied'"), nullable=False),
    )
    op.add_column(
        "routing_changes", sa.Column("outcome_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("routing_changes", sa.Column("version_before", sa.Integer(), nullable=True))
    op.add_column("routing_changes", sa.Column("version_after", sa.Integer(), nullable=True))
    op.create_check_constraint(
        op.f("ck_routing_changes_status"),
        "routing_changes",
        "status IN (" + ", ".join(repr(s) for s in ROUTING_STATUSES) + ")",
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_routing_changes_status"), "routing_changes", type_="check")
    for column in ("version_after", "version_before", "outcome_at", "status"):
        op.drop_column("routing_changes", column)
    for column in ("is_admin", "expires_at", "max_output_tokens", "max_n", "allowed_models"):
        op.drop_column("api_keys", column)
