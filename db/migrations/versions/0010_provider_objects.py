"""provider objects bound to the app that created them

Revision ID: 0010
Revises: 0008
Create Date: 2026-12-04 11:00:00

One row per provider object id (a stored response, a container) an answer created
through the gateway, with the app it belongs to: a request from another app naming it
gets a 404 (`gateway.replica.objects`).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "provider_objects",
        sa.Column("object_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("app", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("object_id"),
    )


def downgrade() -> None:
    op.drop_table("provider_objects")
