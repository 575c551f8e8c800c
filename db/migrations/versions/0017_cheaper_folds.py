"""cheaper folds: a batch of one UTC hour without regrouping its days; tags per tag set

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 06:45:00

The rollup functions are replaced with today's. What changed: when every row a
statement inserted is of one UTC hour (a writer's batch almost always is), the usage
fold writes its day groups straight from its hour groups, which are then one-to-one,
instead of summing them in a second GROUP BY (`rollup_sql.fold_usage_hour_and_day_sql`,
`one_hour`). Other batches fold as before. And the tag rollup sums a batch's rows by tag
set before it spreads each set over its tags (`attribution_sql._tag_groups`), in the
trigger and the rebuild. Issue 29; see docs/ROLLUPS.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from db.analytics import rollup_sql

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for statement in rollup_sql.function_sql(kinds_closed=False):
        op.execute(statement)


def downgrade() -> None:
    # the functions of 0016 fold the same sums; today's are the only ones this tree has,
    # and they work on 0016's tables
    for statement in rollup_sql.function_sql(kinds_closed=False):
        op.execute(statement)
