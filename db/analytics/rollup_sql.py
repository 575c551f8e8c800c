"""The rollups' columns and the SQL that folds ledger rows into them, as text (pure).

One definition serves three users: the migration that creates the tables and the
trigger function (`0006_rollups`), the SQLAlchemy models (`db.analytics.rollup_tables`),
and the rebuild (`db.analytics.rollups`). The trigger and the rebuild run the very same
GROUP BY over raw rows for the hours (the rebuild then sums its days from those hours), so
a rebuilt rollup equals the incrementally kept one (a test checks).
See docs/ROLLUPS.md.
"""

from __future__ import annotations

from typing import Literal

from db.analytics import attribution_sql, latency_sql

Grain = Literal["hour", "day"]
# the latency rollups (db.analytics.latency_sql): callers reach every rollup from here
LATENCY_TABLES = latency_sql.LATENCY_TABLES
LATENCY_DIMENSIONS = latency_sql.LATENCY_DIMENSIONS
BINS_PER_LN = latency_sql.BINS_PER_LN
NBINS = latency_sql.NBINS
latency_key = latency_sql.latency_key
fold_latency_sql = latency_sql.fold_latency_sql
insert_histograms_sql = latency_sql.insert_histograms_sql
bins_add_function_sql = latency_sql.bins_add_function_sql
GRAINS: tuple[Grain, ...] = ("hour", "day")

# table names per grain: the cube (every dimension a view or the usage API slices by)
# and the latency/TTFT histograms of successful requests (the dashboard's latency page)
USAGE_TABLES: dict[Grain, str] = {"hour": "usage_rollup_hourly", "day": "usage_rollup_daily"}
STATE_TABLE = "usage_rollup_state"
# a session that sets this to 'on' deletes raw rows without touching the rollups
# (retention pruning: the rollups outlive the raw rows)
KEEP_ROLLUPS_SETTING = "costgate.keep_rollups"
# the insert trigger's sort and hash memory (a batch's groups: see trigger_function_sql)
FOLD_WORK_MEM = "64MB"

# dimension -> (SQL type, expression over a ledger row `r`)
DIMENSIONS: dict[str, str] = {
    "app": "text",
    "team": "text",
    "key_id": "uuid",
    "requested_model": "text",
    "alias": "text",
    "model": "text",
    "provider": "text",
    "endpoint": "text",
    "status": "text",
    "error_class": "text",
    # functionally given by (provider, model, day) in practice: cheap to keep, and they
    # let FX, re-pricing and exports reach the price version and the billed currency
    "billing_currency": "text",
    "price_version_id": "uuid",
    "baseline_model": "text",
}
NOT_NULL_DIMENSIONS = frozenset({"app", "requested_model", "endpoint", "status"})

# additive integer measures: name -> SQL over a ledger row `r` (summed)
COUNTS: dict[str, str] = {
    "requests": "1",
    "prompt_tokens": "r.prompt_tokens",
    "cached_prompt_tokens": "r.cached_prompt_tokens",
    "completion_tokens": "r.completion_tokens",
    "reasoning_tokens": "r.reasoning_tokens",
    "cache_write_tokens": "r.cache_write_tokens",
    "trimmed_tokens": "r.trimmed_tokens",
    # requests the provider billed (or may have) at a cost we do not know: answered ones,
    # and failed ones whose billable attempts were counted (see dashboard.cube.ANSWERED)
    "unknown_cost_requests": (
        "CASE WHEN r.actual_cost_usd IS NULL AND (r.status IN ('ok', 'cancelled')"
        " OR r.usage_source = 'estimated') THEN 1 ELSE 0 END"
    ),
    "estimated_requests": "CASE WHEN r.usage_source = 'estimated' THEN 1 ELSE 0 END",
    "stream_requests": "CASE WHEN r.stream THEN 1 ELSE 0 END",
    "cache_hit_requests": "CASE WHEN r.cache_hit THEN 1 ELSE 0 END",
}

# exact NUMERIC measures (unconstrained scale: a sum never rounds): NULL when every
# summed value is NULL, as in the ledger (an unknown cost stays unknown, never 0)
MONEY: dict[str, str] = {
    "actual_cost": "r.actual_cost",  # in billing_currency (a dimension)
    "actual_cost_usd": "r.actual_cost_usd",
    "list_cost_usd": "r.list_cost_usd",
    "baseline_cost_usd": "r.baseline_cost_usd",
    "savings_usd": "r.list_cost_usd - r.actual_cost_usd",
    "priced_list_usd": "CASE WHEN r.actual_cost_usd IS NOT NULL THEN r.list_cost_usd END",
    "routing_savings_usd": "r.baseline_cost_usd - r.list_cost_usd",
    "cache_savings_usd": "CASE WHEN r.cache_hit THEN r.list_cost_usd - r.actual_cost_usd END",
    # multiplying by 0.000001 (not dividing by 1e6) keeps NUMERIC exact
    "cached_savings_usd": (
        "r.cached_prompt_tokens * (pv.list_input - pv.list_cached_input) * 0.000001"
    ),
}


def usage_key(grain: Grain) -> tuple[str, ...]:
    """The bucket and every dimension: what makes a usage rollup row one group."""
    del grain  # the same key at every grain
    return ("bucket", *DIMENSIONS)


# one uuid per group of dimensions (migration 0016, issue 29): the usage rollups' unique
# index is (bucket, group_key) instead of the bucket and thirteen dimensions, NULLs among
# them. Measured here on 5,000 new groups: an upsert cost 26-28 µs a row against that
# wide index, 6 µs against a two-column one, and a batch's groups are put in lock order
# by two columns instead of fourteen. The key is the md5 of the row of dimensions as text, where
# NULL and '' differ; two groups share it with probability about n² / 2¹²⁹
GROUP_KEY = "group_key"


def group_key_sql(alias: str) -> str:
    """The group key of the dimensions of `alias` (a ledger row or a rollup row)."""
    return f"md5(row({', '.join(f'{alias}.{d}' for d in DIMENSIONS)})::text)::uuid"


def usage_conflict_key(keyed: bool = True) -> tuple[str, ...]:
    """The usage rollups' unique index: (bucket, group_key) since 0016, the whole key
    before (`keyed` False: the functions migrations 0006-0014 install)."""
    return ("bucket", GROUP_KEY) if keyed else usage_key("hour")


def _bucket(grain: Grain) -> str:
    # the UTC hour or day, whatever the session's time zone
    return f"date_trunc('{grain}', r.started_at, 'UTC')"


def _null_preserving_add(column: str) -> str:
    return (
        f"{column} = CASE WHEN t.{column} IS NULL THEN excluded.{column}"
        f" WHEN excluded.{column} IS NULL THEN t.{column}"
        f" ELSE t.{column} + excluded.{column} END"
    )


def _key_columns(keyed: bool) -> tuple[str, ...]:
    """A usage rollup row's key columns in the order the folds write them."""
    return ("bucket", GROUP_KEY, *DIMENSIONS) if keyed else usage_key("hour")


def _usage_select(grain: Grain, source: str, keyed: bool = True) -> str:
    """The grain's usage groups of the rows of `source`, in conflict-key order."""
    n = len(usage_key(grain))
    select = [f"{_bucket(grain)} AS bucket"]
    select += [f"r.{d}" for d in DIMENSIONS]
    select += [f"coalesce(sum({expr}), 0) AS {name}" for name, expr in COUNTS.items()]
    select += [f"sum({expr}) AS {name}" for name, expr in MONEY.items()]
    positions = ", ".join(str(i) for i in range(1, n + 1))
    groups = (
        f"SELECT {', '.join(select)}\n"
        f"FROM {source} r LEFT JOIN price_versions pv ON pv.id = r.price_version_id\n"
        f"GROUP BY {_GROUPING_POSITIONS}"
    )
    if not keyed:
        return f"{groups} ORDER BY {positions}"
    # the digest once per group, not per row: a realistic batch of 5,000 rows holds a
    # dozen groups
    rest = ", ".join(f"g.{c}" for c in (*DIMENSIONS, *COUNTS, *MONEY))
    return (
        f"SELECT g.bucket, {group_key_sql('g')} AS {GROUP_KEY}, {rest}\n"
        f"FROM ({groups}) AS g ORDER BY 1, 2"
    )


# The usage groups' sort (PostgreSQL 15 sorts in the GROUP BY's order): the dimensions
# that tell groups apart first, so two rows of different groups compare one column, not
# eleven (a batch shares its hour, app, team...). The same groups; when every row is its
# own (a new price version), the fold took 89-91 against 112 ms a 5,000-row batch.
_DISTINCT_FIRST = ("price_version_id", "key_id", "model", "app", "error_class")
_GROUPING_POSITIONS = ", ".join(
    str(usage_key("hour").index(d) + 1)
    for d in (*_DISTINCT_FIRST, *(d for d in usage_key("hour") if d not in _DISTINCT_FIRST))
)


def _usage_upsert(grain: Grain, select: str, keyed: bool = True) -> str:
    columns = (*_key_columns(keyed), *COUNTS, *MONEY)
    updates = [f"{c} = t.{c} + excluded.{c}" for c in COUNTS]
    updates += [_null_preserving_add(c) for c in MONEY]
    return (
        f"INSERT INTO {USAGE_TABLES[grain]} AS t ({', '.join(columns)})\n{select}\n"
        f"ON CONFLICT ({', '.join(usage_conflict_key(keyed))}) DO UPDATE SET {', '.join(updates)}"
    )


def fold_usage_sql(grain: Grain, source: str, keyed: bool = True) -> str:
    """Add the rows of `source` (a relation of ledger rows) to the grain's usage rollup.

    Groups are inserted in conflict-key order, so two writers folding overlapping batches
    lock the same rollup rows in the same order (no deadlock between them).
    """
    return _usage_upsert(grain, _usage_select(grain, source, keyed), keyed)


def fold_usage_hour_and_day_sql(source: str, keyed: bool = True, one_hour: bool = False) -> str:
    """The hourly and daily usage folds of `source` in one statement: the rows are grouped
    once by hour, and the day groups summed from those hour groups (the rebuild's own way,
    `days_from_hours_sql`), not from the rows again. The hourly upsert (a data-modifying
    WITH) and the daily one run in the same order in every writer's statement.

    `one_hour`: every row of `source` is of one UTC hour, so each hour group is its own day
    group and the days need no second GROUP BY. A writer's batch almost always is (it holds
    under a second of traffic); that second aggregate was about 8 µs a row when every row
    is its own group (a third of the fold; 95-98 against 128-145 ms a 5,000-row batch)."""
    dims = ", ".join(_key_columns(keyed)[1:])
    n = len(_key_columns(keyed))
    positions = ", ".join(str(i) for i in range(1, n + 1))
    order = ", ".join(str(i) for i in range(1, len(usage_conflict_key(keyed)) + 1))
    sums = ", ".join(f"sum({m})" for m in (*COUNTS, *MONEY))
    days = (
        f"SELECT date_trunc('day', bucket, 'UTC'), {dims}, {sums}\n"
        f"FROM batch_hours GROUP BY {positions} ORDER BY {order}"
    )
    if one_hour:
        measures = ", ".join((*COUNTS, *MONEY))
        days = (
            f"SELECT date_trunc('day', bucket, 'UTC'), {dims}, {measures}\n"
            f"FROM batch_hours ORDER BY {order}"
        )
    hours = _usage_upsert("hour", f"SELECT * FROM batch_hours ORDER BY {order}", keyed)
    return (
        f"WITH batch_hours AS MATERIALIZED ({_usage_select('hour', source, keyed)}),\n"
        f"hourly AS ({hours})\n{_usage_upsert('day', days, keyed)}"
    )


def fold_attribution_sql(
    source: str, tables: tuple[str, ...] = attribution_sql.TABLES, kinds_closed: bool = True
) -> list[str]:
    """The folds of `source` into the daily rollups by end user, tag and session
    (`kinds_closed`: attribution_sql.fold_sql)."""
    return [attribution_sql.fold_sql(t, source, COUNTS, MONEY, kinds_closed) for t in tables]


def fold_all_sql(
    source: str, attribution: bool = True, keyed: bool = True, kinds_closed: bool = True
) -> list[str]:
    """Every fold for `source` as PL/pgSQL statements, in the one order every writer takes.
    `attribution`: False for migration 0006, which predates those rollups; `keyed`:
    False before 0016's group keys; `kinds_closed`: False before 0019's day close."""
    usage = _fold_usage_by_span(source, keyed)
    latency = latency_sql.fold_latency_hour_and_day_sql(source)
    if not attribution:
        return [usage, latency]
    first = fold_attribution_sql(source, attribution_sql.FOLD_FIRST, kinds_closed)
    last = fold_attribution_sql(source, attribution_sql.FOLD_LAST, kinds_closed)
    return [*first, usage, *last, latency]


def _fold_usage_by_span(source: str, keyed: bool) -> str:
    """The usage folds of `source` (PL/pgSQL): the one-hour way when its rows are of one
    UTC hour, else the general one. No rows (a replay whose rows were all there): else."""
    one_hour = (
        f"(SELECT max(started_at) < date_trunc('hour', min(started_at), 'UTC')"
        f" + interval '1 hour' FROM {source})"
    )
    return (
        f"IF {one_hour} THEN\n"
        f"  {fold_usage_hour_and_day_sql(source, keyed, one_hour=True)};\n"
        f"ELSE\n  {fold_usage_hour_and_day_sql(source, keyed)};\nEND IF"
    )


def trigger_function_sql(
    attribution: bool = True, keyed: bool = True, kinds_closed: bool = True
) -> str:
    """The AFTER INSERT statement trigger's function: folds the statement's new rows.

    It sees only the rows the statement really inserted (ON CONFLICT DO NOTHING skips a
    replayed row), and runs inside the writer's transaction: a row and its rollup
    commit together, whatever its started_at (late rows from a spool replay included).
    """
    body = ";\n  ".join(fold_all_sql("new_rows", attribution, keyed, kinds_closed))
    return (
        "CREATE OR REPLACE FUNCTION usage_rollup_fold() RETURNS trigger\n"
        # a worst-case batch (every row its own group) aggregated 8-25 MB of groups in
        # EXPLAIN ANALYZE here: with the default 4 MB the days' aggregate spilled to disk
        f"LANGUAGE plpgsql SET work_mem = '{FOLD_WORK_MEM}' AS $$\nBEGIN\n"
        f"  {body};\n"
        "  RETURN NULL;\nEND $$"
    )


def delete_function_sql() -> str:
    """The AFTER DELETE statement trigger's function: rebuilds the days the deleted rows
    fell on from the rows left, unless the session keeps its rollups (retention)."""
    return (
        "CREATE OR REPLACE FUNCTION usage_rollup_unfold() RETURNS trigger\n"
        "LANGUAGE plpgsql AS $$\nDECLARE d record;\nBEGIN\n"
        f"  IF coalesce(current_setting('{KEEP_ROLLUPS_SETTING}', true), '') = 'on' THEN\n"
        "    RETURN NULL;\n  END IF;\n"
        "  FOR d IN SELECT DISTINCT date_trunc('day', started_at, 'UTC') AS day\n"
        "           FROM old_rows ORDER BY 1 LOOP\n"
        "    PERFORM usage_rollup_rebuild(d.day, d.day + interval '1 day');\n"
        "  END LOOP;\n"
        "  RETURN NULL;\nEND $$"
    )


def truncate_function_sql(attribution: bool = True) -> str:
    """An emptied ledger empties its rollups too (unless the session keeps them)."""
    tables = ", ".join(all_tables(attribution))
    return (
        "CREATE OR REPLACE FUNCTION usage_rollup_truncate() RETURNS trigger\n"
        "LANGUAGE plpgsql AS $$\nBEGIN\n"
        f"  IF coalesce(current_setting('{KEEP_ROLLUPS_SETTING}', true), '') = 'on' THEN\n"
        "    RETURN NULL;\n  END IF;\n"
        f"  TRUNCATE {tables};\n"
        f"  UPDATE {STATE_TABLE} SET pruned_before = NULL;\n"
        "  RETURN NULL;\nEND $$"
    )


def days_from_hours_sql(
    tables: dict[Grain, str], dimensions: tuple[str, ...], measures: tuple[str, ...]
) -> str:
    """The day rollup of [lo, hi) summed from its hour rollup (inside the rebuild)."""
    dims = ", ".join(dimensions)
    n = len(dimensions) + 1
    positions = ", ".join(str(i) for i in range(1, n + 1))
    sums = ", ".join(f"sum({m})" for m in measures)
    return (
        f"INSERT INTO {tables['day']} (bucket, {dims}, {', '.join(measures)})\n"
        f"SELECT date_trunc('day', bucket, 'UTC'), {dims}, {sums}\n"
        f"FROM {tables['hour']} WHERE bucket >= lo AND bucket < hi\n"
        f"GROUP BY {positions} ORDER BY {positions}"
    )


def rebuild_function_sql(
    attribution: bool = True, keyed: bool = True, kinds_closed: bool = True
) -> str:
    """`usage_rollup_rebuild(start, end)`: every rollup of the whole UTC days in
    [start, end) recomputed from the raw rows; returns the ledger rows folded.

    Days before the retention horizon (`pruned_before`) keep their rollups: their raw
    rows are gone. EXCLUSIVE locks on the rollups wait for writers that folded rows but
    have not committed, and hold new folds back until this commits, so no row is
    counted twice or missed.
    """
    tables = all_tables(attribution)
    locks = "".join(f"  LOCK TABLE {t} IN EXCLUSIVE MODE;\n" for t in tables)
    deletes = "".join(f"  DELETE FROM {t} WHERE bucket >= lo AND bucket < hi;\n" for t in tables)
    source = "(SELECT * FROM usage_records WHERE started_at >= lo AND started_at < hi)"
    # the hours from raw rows, then the days from those hours: the same sums (SUM skips
    # NULLs either way), and a second pass over far fewer rows than the ledger's
    folds = ";\n  ".join(
        [
            fold_usage_sql("hour", source, keyed),
            fold_latency_sql("hour", source),
            days_from_hours_sql(USAGE_TABLES, _key_columns(keyed)[1:], (*COUNTS, *MONEY)),
            latency_sql.latency_days_from_hours_sql(),
            # daily only: straight from the raw rows
            *(fold_attribution_sql(source, kinds_closed=kinds_closed) if attribution else []),
        ]
    )
    return (
        "CREATE OR REPLACE FUNCTION usage_rollup_rebuild(start_at timestamptz,"
        " end_at timestamptz) RETURNS bigint\n"
        "LANGUAGE plpgsql AS $$\nDECLARE lo timestamptz; hi timestamptz; horizon timestamptz;"
        " n bigint;\nBEGIN\n"
        # a rebuild groups whole days of rows: sort them in memory, not on disk
        "  PERFORM set_config('work_mem', '128MB', true);\n"
        f"  SELECT pruned_before INTO horizon FROM {STATE_TABLE};\n"
        "  lo := date_trunc('day', start_at, 'UTC');\n"
        "  hi := date_trunc('day', end_at + interval '1 day' - interval '1 microsecond', 'UTC');\n"
        "  IF horizon IS NOT NULL AND lo < horizon THEN lo := horizon; END IF;\n"
        "  IF lo IS NULL OR hi IS NULL OR lo >= hi THEN RETURN 0; END IF;\n"
        f"{locks}{deletes}"
        f"  {folds};\n"
        "  SELECT count(*) INTO n FROM usage_records WHERE started_at >= lo AND started_at < hi;\n"
        "  RETURN n;\nEND $$"
    )


def all_tables(attribution: bool = True) -> list[str]:
    """Every rollup table, in the one order locks are taken."""
    if not attribution:
        return [*USAGE_TABLES.values(), *LATENCY_TABLES.values()]
    first, last = attribution_sql.FOLD_FIRST, attribution_sql.FOLD_LAST
    return [*first, *USAGE_TABLES.values(), *last, *LATENCY_TABLES.values()]


def function_sql(
    attribution: bool = True, keyed: bool = True, kinds_closed: bool = True
) -> list[str]:
    """Every function the rollups need, in dependency order (`attribution`: False as of
    migration 0006; 0008 replaces them with the rollups by end user, tag and session;
    `keyed`: False until 0016 gives the usage rollups their group keys; `kinds_closed`:
    False until 0019 closes the end users by kind a day at a time)."""
    close = [attribution_sql.close_kinds_function_sql()] if attribution and kinds_closed else []
    return [
        *bins_add_function_sql(),
        rebuild_function_sql(attribution, keyed, kinds_closed),
        trigger_function_sql(attribution, keyed, kinds_closed),
        delete_function_sql(),
        truncate_function_sql(attribution),
        *close,
    ]

