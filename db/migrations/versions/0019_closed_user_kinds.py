"""the end users by kind a closed day at a time; the usage groups sorted distinct first

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 05:00:00

`usage_rollup_user_kind_daily` (a day's costliest end users, for the usage API) now
holds the UTC days before `usage_rollup_state.user_kinds_closed_before` only. A writer
folds a row there only when its day is closed (a late row); the day close,
`usage_rollup_close_user_kinds()` (the ledger writer calls it every hour), sums a day's
end users from `usage_rollup_user_daily` once the day is over. The open days are
answered from the per-app rollup. When every row is a new end user, the per-batch fold
into this table (a new row and two index entries per row) was a sixth of the writer's
database time. And the usage folds group their rows with the columns that tell groups
apart first. Issue 29; see docs/ROLLUPS.md.

Today's UTC day is open from here on: its rows in the table are removed (the per-app
rollup holds the same sums), every day before it is closed.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from db.analytics import attribution_sql, rollup_sql

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATE = rollup_sql.STATE_TABLE
_CLOSED = attribution_sql.KINDS_CLOSED_BEFORE


def upgrade() -> None:
    op.execute(f"ALTER TABLE {_STATE} ADD COLUMN {_CLOSED} timestamptz")
    # the rollups' lock order (rollup_sql.all_tables): a writer that folded today's rows
    # commits first, and none folds until this commits
    for table in rollup_sql.all_tables():
        op.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
    op.execute(f"UPDATE {_STATE} SET {_CLOSED} = date_trunc('day', now(), 'UTC')")
    op.execute(
        f"DELETE FROM {attribution_sql.USER_KIND_TABLE}"
        f" WHERE bucket >= (SELECT {_CLOSED} FROM {_STATE})"
    )
    for statement in rollup_sql.function_sql():
        op.execute(statement)


def downgrade() -> None:
    # every day closed (the table whole again), then the functions that fold each row
    op.execute(f"SELECT {attribution_sql.CLOSE_KINDS_FUNCTION}('infinity')")
    op.execute(f"DROP FUNCTION IF EXISTS {attribution_sql.CLOSE_KINDS_FUNCTION}(timestamptz, int)")
    for statement in rollup_sql.function_sql(kinds_closed=False):
        op.execute(statement)
    op.execute(f"ALTER TABLE {_STATE} DROP COLUMN {_CLOSED}")
