"""the ledger at volume: fewer raw indexes, latency histograms as one map per group

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04 14:00:00

- `usage_records` loses its (model | provider, started_at) indexes: every slice by those
  is read from the rollups, and each index cost the writer time on every row. (app,
  started_at) stays: an app budget's spend reads it.
- The latency rollups keep one row per bucket × group × metric whose `bins` array
  counts requests per bin (bins 2.02% wide: `rollup_sql.BINS_PER_LN` = 50), instead of one row
  per bin at 32 bins per ln. A database migrated before this holds the old shape: its
  histograms are recomputed from the raw rows where they remain, and converted (each old
  bin's requests into the new bin of its midpoint) for the days retention pruned.
- The rollup functions are replaced with today's (`latency_bins_add` first).

See docs/ROLLUPS.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from db.analytics import rollup_sql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DROPPED_INDEXES = {
    "ix_usage_records_model_started_at": "model",
    "ix_usage_records_provider_started_at": "provider",
}
_OLD_BINS_PER_LN = 32


def _has_bin_column(table: str) -> bool:
    return bool(
        op.get_bind()
        .execute(
            sa.text(
                "SELECT 1 FROM information_schema.columns"
                " WHERE table_name = :t AND column_name = 'bin'"
            ),
            {"t": table},
        )
        .first()
    )


def _convert_latency_tables() -> None:
    dims = ", ".join(rollup_sql.LATENCY_DIMENSIONS)
    for grain in rollup_sql.GRAINS:
        table = rollup_sql.LATENCY_TABLES[grain]
        op.execute(f"ALTER TABLE {table} RENAME TO {table}_0011")
        op.execute(f"ALTER INDEX ux_{table}_key RENAME TO ux_{table}_key_0011")
        op.create_table(
            table,
            sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
            *(
                sa.Column(d, sa.Text(), nullable=d not in ("endpoint", "metric"))
                for d in rollup_sql.LATENCY_DIMENSIONS
            ),
            sa.Column("requests", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
            sa.Column("bins", postgresql.ARRAY(sa.BigInteger()), nullable=False),
        )
        op.create_index(
            f"ux_{table}_key",
            table,
            list(rollup_sql.latency_key()),
            unique=True,
            postgresql_nulls_not_distinct=True,
        )
    new_per_ln = rollup_sql.BINS_PER_LN
    # pruned days: no raw rows left, so each old bin moves whole into the new bin of its
    # midpoint (an error within one old bin, 3.2%, as before); the rest from raw rows
    for grain in rollup_sql.GRAINS:
        table = rollup_sql.LATENCY_TABLES[grain]
        moved = (
            f"SELECT bucket, {dims}, least(floor(ln(1 + expm1_mid) * {new_per_ln})::int,"
            f" {rollup_sql.NBINS - 1})"
            " AS bin, sum(requests) AS bin_requests FROM (SELECT *, exp((bin + 0.5) / "
            f"{_OLD_BINS_PER_LN}.0) - 1 AS expm1_mid FROM {table}_0011) o"
            f" WHERE bucket < (SELECT coalesce(pruned_before, '-infinity')"
            f" FROM {rollup_sql.STATE_TABLE}) GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"
        )
        op.execute(rollup_sql.insert_histograms_sql(table, moved))
        op.execute(f"DROP TABLE {table}_0011")
    retained = (
        "(SELECT * FROM usage_records WHERE started_at >= (SELECT"
        f" coalesce(pruned_before, '-infinity') FROM {rollup_sql.STATE_TABLE}))"
    )
    for grain in rollup_sql.GRAINS:
        op.execute(rollup_sql.fold_latency_sql(grain, retained))


def upgrade() -> None:
    for name in _DROPPED_INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
    for statement in rollup_sql.bins_add_function_sql():
        op.execute(statement)
    if _has_bin_column(rollup_sql.LATENCY_TABLES["hour"]):
        _convert_latency_tables()
    for statement in rollup_sql.function_sql(keyed=False, kinds_closed=False):
        op.execute(statement)


def downgrade() -> None:
    # the latency rollups keep today's shape: 0006 creates that shape too (it reads
    # rollup_sql), so the schema equals a fresh upgrade to 0011
    for name, column in _DROPPED_INDEXES.items():
        op.create_index(name, "usage_records", [column, "started_at"])
