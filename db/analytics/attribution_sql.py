"""The daily rollups by end user, by tag and by session, as text (pure). docs/ROLLUPS.md.

They hold the cube's main measures at customer cardinality, each on its own narrow key,
so a page or the usage API grouping 100,000 end users over a month reads one index range
of one table and never the raw rows:

| table | one row per | key |
| --- | --- | --- |
| `usage_rollup_user_daily` | UTC day × app × team × end user × endpoint | rows with an end user |
| `usage_rollup_tag_daily` | UTC day × app × team × tag × value × endpoint | one per tag |
| `usage_rollup_session_daily` | UTC day × app × team × end user × session | rows with a session |

A row with three tags adds to three tag groups: sums over one tag key are exact, sums
across tag keys count a request once per key (as every tag report does).

The measure expressions are the cube's own (`db.analytics.rollup_sql` passes them in),
so a sum here and there of the same rows agree to the last digit.
"""

from __future__ import annotations

USER_TABLE = "usage_rollup_user_daily"
TAG_TABLE = "usage_rollup_tag_daily"
SESSION_TABLE = "usage_rollup_session_daily"
# one row per end user, day and kind (completions or embeddings, as the usage API splits
# them): the costliest end users of a day are the first entries of one index range, with
# nothing to regroup (the usage API's by-user page, docs/ROLLUPS.md)
USER_KIND_TABLE = "usage_rollup_user_kind_daily"
# It holds only the UTC days before this column of `usage_rollup_state` (closed days):
# a writer folds a row there only if its day is closed (a late row), and the day close
# (`close_kinds_function_sql`) sums a day's end users from the per-app rollup once the
# day is over. The open days (today) are answered from `usage_rollup_user_daily`. So a
# request of the live day adds no row and no ranking-index entry here: when every row
# is a new end user, that fold was a sixth of the writer's database time (issue 29).
KINDS_CLOSED_BEFORE = "user_kinds_closed_before"
CLOSE_KINDS_FUNCTION = "usage_rollup_close_user_kinds"

# table -> (its dimensions in key order, the row filter, an optional lateral join)
DIMENSIONS: dict[str, tuple[str, ...]] = {
    # endpoint last: the usage API's completions and embeddings each cover some endpoints
    # only, and a key prefix without it still serves the budget and erasure look-ups
    USER_TABLE: ("app", "team", "end_user", "endpoint"),
    TAG_TABLE: ("app", "team", "tag_key", "tag_value", "endpoint"),
    SESSION_TABLE: ("app", "team", "end_user", "session_id"),
    USER_KIND_TABLE: ("kind", "end_user"),
}
NOT_NULL: dict[str, frozenset[str]] = {
    USER_TABLE: frozenset({"app", "end_user"}),
    TAG_TABLE: frozenset({"app", "tag_key", "tag_value"}),
    SESSION_TABLE: frozenset({"app", "session_id"}),  # a session without an end user too
    USER_KIND_TABLE: frozenset({"kind", "end_user"}),
}
# table -> the rows it folds (the tag rollup: a JSON null or array carries no tag, and
# must not fail the writer's batch)
_WHERE: dict[str, str] = {
    USER_TABLE: "r.end_user IS NOT NULL",
    TAG_TABLE: "jsonb_typeof(r.tags) = 'object'",
    SESSION_TABLE: "r.session_id IS NOT NULL",
    USER_KIND_TABLE: "r.end_user IS NOT NULL",
}
# the rows of closed days only (see KINDS_CLOSED_BEFORE): read once per statement, after
# the per-app user fold took its table's lock, which the day close waits for
_CLOSED_ONLY = f" AND r.started_at < (SELECT {KINDS_CLOSED_BEFORE} FROM usage_rollup_state)"


def kind_of(alias: str) -> str:
    """The usage API's kind of a row or rollup row (`alias`) by its endpoint."""
    return f"CASE WHEN {alias}.endpoint = 'embeddings' THEN 'embeddings' ELSE 'completions' END"


_EXPRESSIONS = {"kind": kind_of("r")}
# the order a day's end users are ranked in (the usage API's results), and its index
COSTLIEST = ("actual_cost_usd DESC NULLS LAST", "requests DESC", "end_user")
RANK_INDEX = f"ix_{USER_KIND_TABLE}_rank"

# the cube's measures kept here (a subset: the ones cost per customer needs)
COUNT_NAMES = (
    "requests",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "unknown_cost_requests",
    "cache_hit_requests",
)
MONEY_NAMES = ("actual_cost_usd", "list_cost_usd", "savings_usd")
TABLES = tuple(DIMENSIONS)

# Where these rollups come in the one order every writer folds in and every rebuild
# locks in (`rollup_sql.fold_all_sql`, `all_tables`; one order: no deadlock between them),
# the usage rollups between the two: first the rollups whose groups two concurrent
# batches rarely share (an end user's day, a session, a price version's hour), last the
# ones every batch of an hour shares (its tags, then the latency histograms). A batch
# holds its groups' row locks until it commits, so another writer's batch (the writer's
# other connection: gateway.ledger.lanes) waits at the first group they share: with the
# shared folds last, for the end of a batch, not for most of it (issue 29).
FOLD_FIRST = (USER_TABLE, SESSION_TABLE, USER_KIND_TABLE)
FOLD_LAST = (TAG_TABLE,)


def key(table: str) -> tuple[str, ...]:
    return ("bucket", *DIMENSIONS[table])


# the column that tells a batch's groups apart sorted first (the rest in key order): the
# rows of a batch share their day, app and team, so two of them compared one text column
# with the collation's strcoll, not three (issue 29: 45-46 against 49-50 ms a 5,000-row
# batch of new end users and sessions). One order in every writer: no deadlock.
_SORT_FIRST = {USER_TABLE: "end_user", SESSION_TABLE: "session_id", USER_KIND_TABLE: "end_user"}


def _sort_positions(table: str) -> str:
    """The GROUP BY and ORDER BY of a fold into `table`, as select-list positions."""
    columns = key(table)
    first = _SORT_FIRST.get(table)
    order = [first] if first else []
    order += [c for c in columns if c != first]
    return ", ".join(str(columns.index(c) + 1) for c in order)


def fold_sql(
    table: str,
    source: str,
    counts: dict[str, str],
    money: dict[str, str],
    kinds_closed: bool = True,
) -> str:
    """Add the rows of `source` to `table`'s days, groups in one order every writer takes
    (`_sort_positions`: no deadlock between two writers folding overlapping batches).
    `counts`/`money`: the cube's expressions.
    `kinds_closed`: False before migration 0019, whose day close the kinds' fold awaits."""
    dims = DIMENSIONS[table]
    where = _WHERE[table] + (_CLOSED_ONLY if kinds_closed and table == USER_KIND_TABLE else "")
    positions = _sort_positions(table)
    grouped = _tag_groups(source, counts, money) if table == TAG_TABLE else None
    select = ["date_trunc('day', r.started_at, 'UTC') AS bucket"]
    select += [f"{_EXPRESSIONS.get(d, 'r.' + d)} AS {d}" for d in dims]
    select += [f"coalesce(sum({counts[c]}), 0) AS {c}" for c in COUNT_NAMES]
    select += [f"sum({money[m]}) AS {m}" for m in MONEY_NAMES]
    rows = f"FROM {source} r\nWHERE {where}"
    if grouped is not None:
        # a row's tags are summed with the other rows of its tag set first, and each set's
        # sums then go to its tags: jsonb_each_text per tag set, not per row (issue 29:
        # 11 against 34 ms a 5,000-row batch with 20 tag sets)
        select = ["s.bucket", "s.app", "s.team", "tg.tag_key", "tg.tag_value", "s.endpoint"]
        select += [f"sum(s.{m})" for m in (*COUNT_NAMES, *MONEY_NAMES)]
        rows = (
            f"FROM ({grouped}) AS s\n"
            "CROSS JOIN LATERAL jsonb_each_text(s.tags) AS tg(tag_key, tag_value)"
        )
    updates = [f"{c} = t.{c} + excluded.{c}" for c in COUNT_NAMES]
    updates += [
        f"{m} = CASE WHEN t.{m} IS NULL THEN excluded.{m} WHEN excluded.{m} IS NULL"
        f" THEN t.{m} ELSE t.{m} + excluded.{m} END"
        for m in MONEY_NAMES
    ]
    columns = (*key(table), *COUNT_NAMES, *MONEY_NAMES)
    return (
        f"INSERT INTO {table} AS t ({', '.join(columns)})\n"
        f"SELECT {', '.join(select)}\n{rows}\n"
        f"GROUP BY {positions} ORDER BY {positions}\n"
        f"ON CONFLICT ({', '.join(key(table))}) DO UPDATE SET {', '.join(updates)}"
    )


def _tag_groups(source: str, counts: dict[str, str], money: dict[str, str]) -> str:
    """The tag rollup's measures of `source` by day, app, team, tag set and endpoint."""
    select = [
        "date_trunc('day', r.started_at, 'UTC') AS bucket",
        "r.app",
        "r.team",
        "r.tags",
        "r.endpoint",
    ]
    select += [f"coalesce(sum({counts[c]}), 0) AS {c}" for c in COUNT_NAMES]
    select += [f"sum({money[m]}) AS {m}" for m in MONEY_NAMES]
    return (
        f"SELECT {', '.join(select)}\nFROM {source} r\nWHERE {_WHERE[TAG_TABLE]}\n"
        "GROUP BY 1, 2, 3, 4, 5"
    )


def rank_index_sql() -> str:
    """The index that lists a day's end users of one kind, costliest first."""
    return (
        f"CREATE INDEX IF NOT EXISTS {RANK_INDEX} ON {USER_KIND_TABLE}"
        f" (bucket, kind, {', '.join(COSTLIEST)})"
    )


def close_kinds_function_sql() -> str:
    """`usage_rollup_close_user_kinds([until[, max_days]])`: the end users by kind of every
    UTC day from the last one closed up to yesterday (the database's clock; or up to
    `until`, a UTC midnight; at most `max_days` of them), summed from the per-app user
    rollup, and those days marked closed; returns the rows written (0: nothing to close).

    The SHARE lock on the per-app rollup waits for every writer that folded rows into it
    and has not committed, and holds back new folds until this commits. A writer reads
    the closed days after its own fold there (`FOLD_FIRST`), so each of its rows is
    counted once: by this close (it committed first), or by its own fold (it read the
    new mark). Sums of the per-app sums: the same figures as folding the rows (a NULL
    cost stays NULL only when every row's is)."""
    columns = (*key(USER_KIND_TABLE), *COUNT_NAMES, *MONEY_NAMES)
    sums = [f"coalesce(sum(u.{c}), 0)" for c in COUNT_NAMES]
    sums += [f"sum(u.{m})" for m in MONEY_NAMES]
    replace = ", ".join(f"{c} = excluded.{c}" for c in (*COUNT_NAMES, *MONEY_NAMES))
    positions = _sort_positions(USER_KIND_TABLE)
    state = "usage_rollup_state"
    done = "  IF lo IS NOT NULL AND lo >= hi THEN RETURN 0; END IF;\n"
    return (
        f"CREATE OR REPLACE FUNCTION {CLOSE_KINDS_FUNCTION}(until timestamptz DEFAULT NULL,"
        " max_days int DEFAULT NULL) RETURNS bigint\n"
        "LANGUAGE plpgsql SET work_mem = '128MB' AS $$\n"
        "DECLARE lo timestamptz; n bigint;\n"
        "  hi timestamptz := coalesce(until, date_trunc('day', now(), 'UTC'));\n"
        f"BEGIN\n  SELECT {KINDS_CLOSED_BEFORE} INTO lo FROM {state};\n{done}"
        f"  LOCK TABLE {USER_TABLE} IN SHARE MODE;\n"
        f"  SELECT {KINDS_CLOSED_BEFORE} INTO lo FROM {state} FOR UPDATE;\n{done}"
        "  IF lo IS NOT NULL AND max_days IS NOT NULL THEN\n"
        "    hi := least(hi, lo + make_interval(days => max_days));\n  END IF;\n"
        f"  INSERT INTO {USER_KIND_TABLE} AS t ({', '.join(columns)})\n"
        f"  SELECT u.bucket, {kind_of('u')}, u.end_user, {', '.join(sums)}\n"
        f"  FROM {USER_TABLE} u WHERE u.bucket >= coalesce(lo, '-infinity') AND u.bucket < hi\n"
        f"  GROUP BY {positions} ORDER BY {positions}\n"
        f"  ON CONFLICT ({', '.join(key(USER_KIND_TABLE))}) DO UPDATE SET {replace};\n"
        "  GET DIAGNOSTICS n = ROW_COUNT;\n"
        f"  UPDATE {state} SET {KINDS_CLOSED_BEFORE} = hi;\n"
        "  RETURN n;\nEND $$"
    )
