"""hourly and daily rollups of the ledger, kept by PostgreSQL as rows arrive

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 14:00:00

Four tables (the usage cube and the latency/TTFT histograms, each per UTC hour and day),
one state row, and statement-level triggers on usage_records: AFTER INSERT folds the
statement's new rows (a transition table) into the rollups inside the writer's own
transaction; AFTER DELETE rebuilds the days it touched (unless the session keeps its
rollups, as retention pruning does); AFTER TRUNCATE empties them. Existing rows are
folded in by the backfill at the end. See docs/ROLLUPS.md.

The SQL comes from `db.analytics.rollup_sql` as of this revision; a later change to it
ships in a migration of its own that replaces the functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from db.analytics import rollup_sql, rollup_tables

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TYPES = {"text": sa.Text(), "uuid": sa.Uuid(), "integer": sa.Integer()}


def _usage_table(grain: rollup_sql.Grain) -> None:
    name = rollup_sql.USAGE_TABLES[grain]
    op.create_table(
        name,
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        *(
            sa.Column(d, _TYPES[t], nullable=d not in rollup_sql.NOT_NULL_DIMENSIONS)
            for d, t in rollup_sql.DIMENSIONS.items()
        ),
        *(
            sa.Column(c, sa.BigInteger(), nullable=False, server_default=sa.text("0"))
            for c in rollup_sql.COUNTS
        ),
        *(sa.Column(m, sa.Numeric()) for m in rollup_sql.MONEY),
    )
    op.create_index(
        f"ux_{name}_key",
        name,
        list(rollup_sql.usage_key(grain)),
        unique=True,
        postgresql_nulls_not_distinct=True,
    )


def _latency_table(grain: rollup_sql.Grain) -> None:
    name = rollup_sql.LATENCY_TABLES[grain]
    op.create_table(
        name,
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        *(
            sa.Column(d, _TYPES[t], nullable=d not in ("endpoint", "metric"))
            for d, t in rollup_sql.LATENCY_DIMENSIONS.items()
        ),
        sa.Column("requests", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        # the shape of rollup_sql today (one histogram per group, 0012): a database
        # migrated before 0012 holds one row per bin, which 0012 converts
        sa.Column("bins", postgresql.ARRAY(sa.BigInteger()), nullable=False),
    )
    op.create_index(
        f"ux_{name}_key",
        name,
        list(rollup_sql.latency_key()),
        unique=True,
        postgresql_nulls_not_distinct=True,
    )


def upgrade() -> None:
    for grain in rollup_sql.GRAINS:
        _usage_table(grain)
        _latency_table(grain)
    op.create_table(
        rollup_sql.STATE_TABLE,
        sa.Column("id", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("pruned_before", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("id", name=op.f("ck_usage_rollup_state_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_rollup_state")),
    )
    op.execute(f"INSERT INTO {rollup_sql.STATE_TABLE} (id) VALUES (true)")
    # the functions as of this revision: no attribution rollups, no group keys (0016)
    functions = rollup_sql.function_sql(attribution=False, keyed=False)
    for statement in (*functions, *rollup_tables.TRIGGERS_SQL):
        op.execute(statement)
    # the backfill: every existing row, folded by the same SQL the trigger runs
    op.execute(
        "SELECT usage_rollup_rebuild(min(started_at), max(started_at) + interval '1 microsecond')"
        " FROM usage_records"
    )


def downgrade() -> None:
    for statement in rollup_tables.DROP_SQL:
        op.execute(statement)
    op.drop_table(rollup_sql.STATE_TABLE)
    for grain in reversed(rollup_sql.GRAINS):
        op.drop_table(rollup_sql.LATENCY_TABLES[grain])
        op.drop_table(rollup_sql.USAGE_TABLES[grain])
