"""usage_records partitioned by UTC week; the writer's idempotency on (request_id, started_at)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 14:30:00

The ledger becomes `PARTITION BY RANGE (started_at)`: one partition per UTC week, a
default partition for any row no week holds, the weeks from the oldest row to four weeks
ahead created here (then by the writer and `costgate ledger partitions`). Every row is
copied (the old table's count is checked against the new one's before it is dropped);
the rollups are untouched (the new table's triggers are created after the copy, so the
copy folds nothing twice).

PostgreSQL needs the partition key in every unique index of a partitioned table, so the
primary key is (request_id, started_at): the writer's `ON CONFLICT (request_id,
started_at) DO NOTHING` still skips a replayed row, which carries the same started_at
as when it was first written (a record's times are fixed when it is made). A request id
is a fresh UUID per request, so nothing else ever shares one. See docs/ROLLUPS.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.analytics import rollup_tables
from db.partitions import sql as partition_sql

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "usage_records_unpartitioned"


def _index_definitions(table: str) -> list[tuple[str, str]]:
    rows = op.get_bind().execute(
        sa.text(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = :t"
            " AND i.indexname NOT IN (SELECT conname FROM pg_constraint"
            " WHERE conrelid = to_regclass(:t) AND contype = 'p')"
        ),
        {"t": table},
    )
    return [(n, d) for n, d in rows]


def _rebuild(partitioned: bool) -> None:
    """Move every row of usage_records into a new table of the other kind."""
    parent = partition_sql.PARENT
    indexes = _index_definitions(parent)
    for statement in rollup_tables.DROP_SQL[:3]:  # the triggers; the functions stay
        op.execute(statement)
    op.execute(f"ALTER TABLE {parent} RENAME TO {_OLD}")
    op.execute(f"ALTER INDEX pk_usage_records RENAME TO pk_{_OLD}")
    for index_name, _ in indexes:
        op.execute(f"ALTER INDEX {index_name} RENAME TO {index_name}_old")
    by = " PARTITION BY RANGE (started_at)" if partitioned else ""
    op.execute(
        f"CREATE TABLE {parent} (LIKE {_OLD} INCLUDING DEFAULTS INCLUDING CONSTRAINTS){by}"
    )
    key = "request_id, started_at" if partitioned else "request_id"
    op.execute(f"ALTER TABLE {parent} ADD CONSTRAINT pk_usage_records PRIMARY KEY ({key})")
    for _, definition in indexes:
        op.execute(definition.replace(f" ON public.{parent} ", f" ON {parent} "))
    if partitioned:
        op.execute(f"CREATE TABLE {partition_sql.DEFAULT} PARTITION OF {parent} DEFAULT")
        op.execute(partition_sql.ENSURE_FUNCTION_SQL)
        op.execute(
            f"SELECT {partition_sql.ENSURE_FUNCTION}((SELECT min(started_at) FROM {_OLD}),"
            f" {partition_sql.AHEAD_WEEKS})"
        )
    op.execute(f"INSERT INTO {parent} SELECT * FROM {_OLD}")
    # not one row lost: the copy holds exactly the old table's rows
    op.execute(
        "DO $$ BEGIN IF (SELECT count(*) FROM usage_records) <>"
        f" (SELECT count(*) FROM {_OLD}) THEN RAISE EXCEPTION 'usage_records: rows lost';"
        " END IF; END $$"
    )
    op.execute(f"DROP TABLE {_OLD}")
    for statement in rollup_tables.TRIGGERS_SQL:
        op.execute(statement)


def upgrade() -> None:
    _rebuild(partitioned=True)


def downgrade() -> None:
    _rebuild(partitioned=False)
    op.execute(f"DROP FUNCTION IF EXISTS {partition_sql.ENSURE_FUNCTION}(timestamptz, integer)")
