"""The weekly partitions' upkeep on a live ledger: created ahead, dropped whole.

Never on a request's path: the record writer calls `ENSURE_SQL` on its own connection
when it connects and then hourly (`gateway.ledger.database`), `costgate ledger
partitions` runs `ensure_partitions`, and retention (`costgate rollups prune`,
`db.analytics.rollups.drop_weeks_before`) drops whole weeks before it deletes what is
left day by day. See docs/ROLLUPS.md.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Engine, text

from db.partitions.sql import AHEAD_WEEKS, ENSURE_FUNCTION, IS_PARTITIONED_SQL, LIST_SQL

# a DDL statement waits for the writers' open transactions and holds new ones back
# meanwhile: give up (and retry on the next run) rather than queue behind a long report
LOCK_TIMEOUT = "5s"


def is_partitioned(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text(IS_PARTITIONED_SQL)).scalar_one())


def partitions(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r for (r,) in conn.execute(text(LIST_SQL))]


def ensure_partitions(
    engine: Engine, since: dt.datetime | None = None, ahead_weeks: int = AHEAD_WEEKS
) -> int:
    """Create the missing weeks from `since` (default: this week) to `ahead_weeks` ahead;
    returns how many were created."""
    with engine.begin() as conn:
        conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
        made = conn.execute(
            text(f"SELECT {ENSURE_FUNCTION}(:since, :ahead)"),
            {"since": since, "ahead": ahead_weeks},
        ).scalar_one()
    return int(made)
