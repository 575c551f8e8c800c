"""Rollup maintenance: rebuild from raw rows, prune raw rows past retention, and status.

PostgreSQL keeps the rollups itself as rows arrive (the triggers of migration 0006,
docs/ROLLUPS.md); these are for operators: `costgate rollups rebuild` after a change
to the ledger made with the triggers off, `costgate rollups prune` (from cron, or by
hand) to enforce `ledger.retention_days`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import Engine, text

from db.analytics.attribution_sql import CLOSE_KINDS_FUNCTION, KINDS_CLOSED_BEFORE
from db.analytics.rollup_sql import KEEP_ROLLUPS_SETTING, STATE_TABLE, USAGE_TABLES
from db.partitions.maintenance import LOCK_TIMEOUT, is_partitioned, partitions
from db.partitions.sql import start_of


@dataclasses.dataclass(frozen=True)
class RollupStatus:
    raw_rows: int
    first_raw: dt.datetime | None
    last_raw: dt.datetime | None
    hourly_rows: int
    daily_rows: int
    daily_requests: int  # equals raw_rows while nothing was pruned
    pruned_before: dt.datetime | None
    # the end users by kind hold the UTC days before this (the later ones: the per-app
    # user rollup; docs/ROLLUPS.md)
    kinds_closed_before: dt.datetime | None


def utc_midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), dt.UTC)


def rebuild(engine: Engine, start: dt.datetime, end: dt.datetime) -> int:
    """Recompute every rollup of the UTC days [start, end) from raw rows (days before the
    retention horizon are left alone); returns the raw rows folded."""
    with engine.begin() as conn:
        folded = conn.execute(
            text("SELECT usage_rollup_rebuild(:start, :end)"), {"start": start, "end": end}
        ).scalar_one()
    return int(folded)


def rebuild_all(engine: Engine) -> int:
    with engine.connect() as conn:
        first, last = conn.execute(
            text("SELECT min(started_at), max(started_at) FROM usage_records")
        ).one()
    if first is None:
        return 0
    return rebuild(engine, first, last + dt.timedelta(microseconds=1))


def retention_cutoff(today: dt.date, retention_days: int) -> dt.datetime:
    """Raw rows that started before this are past retention (a whole UTC day boundary)."""
    return utc_midnight(today - dt.timedelta(days=retention_days))


def prune(engine: Engine, before: dt.datetime, max_days: int | None = None) -> int:
    """Delete raw rows that started before `before` (a UTC midnight), keeping their
    rollups: every weekly partition that ends by then dropped whole, then what is left
    (the default partition's, a partial week's) one UTC day per transaction, oldest
    first. Returns the rows deleted.

    The horizon moves with each day, so an interrupted prune leaves a consistent state:
    a rebuild never recomputes a day whose raw rows are partly gone.
    """
    deleted = 0
    close_days(engine)  # from cron: the days that ended, if no writer closed them yet
    if is_partitioned(engine):  # whole weeks go as tables: no DELETE, no vacuum
        deleted += drop_weeks_before(engine, before)[1]
    days = 0
    while max_days is None or days < max_days:
        with engine.begin() as conn:
            first = conn.execute(
                text("SELECT min(started_at) FROM usage_records WHERE started_at < :b"),
                {"b": before},
            ).scalar_one()
            if first is None:
                break
            day_end = min(
                before, utc_midnight(first.astimezone(dt.UTC).date() + dt.timedelta(days=1))
            )
            conn.execute(text(f"SET LOCAL {KEEP_ROLLUPS_SETTING} = 'on'"))
            # the horizon first: a rebuild that starts meanwhile leaves this day alone
            conn.execute(
                text(
                    f"UPDATE {STATE_TABLE} SET pruned_before = :at"
                    " WHERE pruned_before IS NULL OR pruned_before < :at"
                ),
                {"at": day_end},
            )
            result = conn.execute(
                text("DELETE FROM usage_records WHERE started_at < :end"), {"end": day_end}
            )
            deleted += int(result.rowcount or 0)
        days += 1
    return deleted


def status(engine: Engine) -> RollupStatus:
    with engine.connect() as conn:
        raw, first, last = conn.execute(
            text("SELECT count(*), min(started_at), max(started_at) FROM usage_records")
        ).one()
        hourly = conn.execute(text(f"SELECT count(*) FROM {USAGE_TABLES['hour']}")).scalar_one()
        daily, requests = conn.execute(
            text(f"SELECT count(*), coalesce(sum(requests), 0) FROM {USAGE_TABLES['day']}")
        ).one()
        pruned, closed = conn.execute(
            text(f"SELECT pruned_before, {KINDS_CLOSED_BEFORE} FROM {STATE_TABLE}")
        ).one()
    return RollupStatus(
        int(raw), first, last, int(hourly), int(daily), int(requests), pruned, closed
    )


def close_days(engine: Engine, until: dt.datetime | None = None) -> int:
    """Close the end users by kind of every UTC day that ended (or before `until`, a UTC
    midnight): the ledger writer does it hourly; `costgate rollups close` and prune too.
    Returns the rollup rows written (0: nothing to close)."""
    with engine.begin() as conn:
        written = conn.execute(
            text(f"SELECT {CLOSE_KINDS_FUNCTION}(:until)"), {"until": until}
        ).scalar_one()
    return int(written)


def drop_weeks_before(engine: Engine, before: dt.datetime) -> tuple[list[str], int]:
    """Drop every weekly partition that ends on or before `before`, oldest first, one per
    transaction, moving the retention horizon (`pruned_before`) to its end first. The
    rollups keep those rows (a dropped table fires no DELETE trigger). Returns the
    partitions dropped and the rows they held."""
    dropped, rows = [], 0
    for table in partitions(engine):
        start = start_of(table)
        if start is None or start + dt.timedelta(days=7) > before:
            continue
        end = start + dt.timedelta(days=7)
        with engine.begin() as conn:
            conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
            conn.execute(
                text(
                    f"UPDATE {STATE_TABLE} SET pruned_before = :at"
                    " WHERE pruned_before IS NULL OR pruned_before < :at"
                ),
                {"at": end},
            )
            rows += int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
            conn.execute(text(f"DROP TABLE {table}"))
        dropped.append(table)
    return dropped, rows
