"""The ledger's weekly partitions as text (pure): names and the upkeep's SQL.

`usage_records` is partitioned by RANGE (started_at), one partition per UTC week (Monday
00:00 to the next Monday), named `usage_records_pYYYYMMDD` after its Monday, plus
`usage_records_default`, which takes any row no week holds (a replayed row older than
the oldest partition, a clock far ahead): no row is ever refused for its date.

`usage_records_ensure_partitions(since, ahead_weeks)` creates every missing week from
the week of `since` to `ahead_weeks` after this one. A week whose rows the default
partition took meanwhile becomes a table of its own with those rows moved in, then
attached: statements on a partition fire none of the parent's statement-level rollup
triggers, so the rollups (which counted those rows once already) stay as they are. A
transaction-level advisory lock makes concurrent callers (several writers) take turns.
"""

from __future__ import annotations

import datetime as dt

PARENT = "usage_records"
DEFAULT = "usage_records_default"
PREFIX = "usage_records_p"
ENSURE_FUNCTION = "usage_records_ensure_partitions"
# weeks created ahead of the current one: a writer or `costgate ledger partitions` that
# does not run for this long still finds its week in place
AHEAD_WEEKS = 4


def week_name(start: dt.date) -> str:
    return f"{PREFIX}{start:%Y%m%d}"


def start_of(partition: str) -> dt.datetime | None:
    """The Monday a weekly partition's name says (None: not a weekly partition)."""
    if not partition.startswith(PREFIX):
        return None
    try:
        day = dt.datetime.strptime(partition[len(PREFIX) :], "%Y%m%d")
    except ValueError:
        return None
    return day.replace(tzinfo=dt.UTC)


ENSURE_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION {ENSURE_FUNCTION}(since timestamptz, ahead_weeks integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE wk timestamptz; stop timestamptz; t text; n integer := 0;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('{ENSURE_FUNCTION}'));
  wk := date_trunc('week', coalesce(since, now()), 'UTC');
  stop := date_trunc('week', now(), 'UTC') + make_interval(weeks => ahead_weeks);
  WHILE wk <= stop LOOP
    t := '{PREFIX}' || to_char(wk AT TIME ZONE 'UTC', 'YYYYMMDD');
    IF to_regclass(t) IS NULL THEN
      IF EXISTS (SELECT 1 FROM {DEFAULT}
                 WHERE started_at >= wk AND started_at < wk + interval '7 days') THEN
        EXECUTE format('CREATE TABLE %I (LIKE {PARENT} INCLUDING DEFAULTS'
                       ' INCLUDING CONSTRAINTS)', t);
        EXECUTE format('WITH moved AS (DELETE FROM {DEFAULT} WHERE started_at >= %L'
                       ' AND started_at < %L RETURNING *) INSERT INTO %I SELECT * FROM moved',
                       wk, wk + interval '7 days', t);
        EXECUTE format('ALTER TABLE {PARENT} ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       t, wk, wk + interval '7 days');
      ELSE
        EXECUTE format('CREATE TABLE %I PARTITION OF {PARENT} FOR VALUES FROM (%L) TO (%L)',
                       t, wk, wk + interval '7 days');
      END IF;
      n := n + 1;
    END IF;
    wk := wk + interval '7 days';
  END LOOP;
  RETURN n;
END $$
"""

ENSURE_SQL = f"SELECT {ENSURE_FUNCTION}(NULL, {AHEAD_WEEKS})"

LIST_SQL = (
    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
    f" JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = '{PARENT}' ORDER BY 1"
)
IS_PARTITIONED_SQL = (
    "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table t JOIN pg_class c"
    f" ON c.oid = t.partrelid WHERE c.relname = '{PARENT}')"
)
