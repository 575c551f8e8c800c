"""Seeding past what Python draws quickly: the database copies a drawn sample.

`costgate seed` draws every row in Python (the draws, the pricing by the gateway's own
catalog, a COPY line): a million rows took 211.7 s here (docs/ROLLUPS.md), so 50,000,000
would take about three hours, and `synthesize` holds nine random floats per row as
Python lists (some 14 GB at 50,000,000 rows) before the first row. Past
`SAMPLE_ROWS` it draws a sample of that many rows over the whole period (the same
rhythm, growth, failures, prices, end users and tags) into a temporary table, and the
database writes the ledger as copies of the sample, one `INSERT … SELECT` each:

- a copy's row keeps its source's UTC hour (so its price version, its place in the
  daily and weekly rhythm and in the growth) at a random instant of that hour, never
  past the history's end, and its duration;
- it gets a fresh seeded request id (version 8, `seed.SEEDED_SQL`), and its own session
  (the source's session id with the copy's number appended);
- its end user is the source's stand-in in this copy
  (`seed_attribution.stand_in_rank`): the heaviest customers are themselves in every
  copy, a tail customer is another customer of the same rank block and plan, so the
  copies reach the tail of the population that the sample missed (and the end-user
  rollups grow as fifty draws would make them), with each session still one customer's;
- its app, key, tags, model, tokens and costs are the source's.

Every copy is its own transaction, so the insert trigger folds the rollups once per copy
(docs/ROLLUPS.md); the last copy takes a random part of the sample to reach `rows`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from gateway.devtools.copy_rows import CopyLines
from gateway.devtools.seed_attribution import copy_stand_ins

SAMPLE_TABLE = "seed_sample"
# (customer, stand-in) for the copy being written: only customers who are not themselves
STAND_INS_TABLE = "seed_stand_ins"
# rows drawn in Python before the database copies them: about 200 s of drawing here
SAMPLE_ROWS = 1_000_000


def create_sample_table(conn: psycopg.Connection[Any]) -> str:
    """A temporary table shaped like the ledger (no indexes, no triggers) for the sample."""
    conn.execute(
        sql.SQL("CREATE TEMP TABLE {} (LIKE usage_records INCLUDING DEFAULTS)").format(
            sql.Identifier(SAMPLE_TABLE)
        )
    )
    return SAMPLE_TABLE


def copy_lines(
    conn: psycopg.Connection[Any],
    table: str,
    columns: tuple[str, ...],
    rows: Iterable[tuple[Any, ...]],
    progress: Callable[[int], None] | None = None,
) -> int:
    """COPY `rows` (in `columns` order) into `table` as text lines, 10,000 a write;
    returns how many. `progress` hears every 100,000th."""
    render, lines, written = CopyLines(), [], 0
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    )
    with conn.cursor() as cur, cur.copy(statement) as copy:
        for row in rows:
            lines.append(render.line(row))
            written += 1
            if len(lines) == 10_000:
                copy.write("\n".join(lines) + "\n")
                lines.clear()
            if progress and written % 100_000 == 0:
                progress(written)
        if lines:
            copy.write("\n".join(lines) + "\n")
    return written


def _first_rows(select: str) -> str:
    """The last copy's part of the sample (`{}`): its first %(rows)s rows by request id,
    which are random, and the same for the copy and for counting its customers."""
    return f"(SELECT {select} FROM {{}} ORDER BY request_id LIMIT %(rows)s)"


def _copy_sql(columns: tuple[str, ...], part: bool) -> sql.Composed:
    """One copy of the sample (`part`: of a random part of it, its size a parameter)."""
    # one instant per row (random() runs once in the lateral subquery), used by both ends
    exprs = {
        "request_id": sql.SQL("overlay(gen_random_uuid()::text placing '8' from 15 for 1)::uuid"),
        "started_at": sql.SQL("x.t"),
        "ended_at": sql.SQL("x.t + (s.ended_at - s.started_at)"),
        "session_id": sql.SQL("s.session_id || '-' || {copy}::text").format(
            copy=sql.Placeholder("copy")
        ),
        "end_user": sql.SQL("coalesce(m.stand_in, s.end_user)"),
    }
    values = [exprs.get(c, sql.SQL("s.{}").format(sql.Identifier(c))) for c in columns]
    source = sql.SQL(_first_rows("*") if part else "{}")
    return sql.SQL(
        "INSERT INTO usage_records ({cols}) SELECT {values} FROM {source} AS s"
        " LEFT JOIN {stand_ins} AS m ON m.customer = s.end_user"
        " CROSS JOIN LATERAL (SELECT h.h + random() * (least(h.h + interval '1 hour',"
        " %(end)s::timestamptz) - h.h) AS t"
        " FROM (SELECT date_trunc('hour', s.started_at, 'UTC') AS h) AS h) AS x"
    ).format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        values=sql.SQL(", ").join(values),
        source=source.format(sql.Identifier(SAMPLE_TABLE)),
        stand_ins=sql.Identifier(STAND_INS_TABLE),
    )


def write_copies(
    conn: psycopg.Connection[Any],
    columns: tuple[str, ...],
    rows: int,
    end: dt.datetime,
    progress: Callable[[int], None] | None = None,
    populations: Sequence[int] = (),
) -> tuple[int, int]:
    """The sample itself, then copies of it until the ledger holds `rows` more rows; each
    in a transaction of its own. `populations`: the apps' customer counts
    (`seed_attribution.populations`; none: every customer stands for themselves).
    Returns the rows written and the distinct end users they hold."""
    sample = conn.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(SAMPLE_TABLE))
    ).fetchone()
    size = int(sample[0]) if sample else 0
    if size == 0:
        return 0, 0
    # the sample as drawn first (copy 0: its own request ids and sessions)
    conn.execute(
        sql.SQL("INSERT INTO usage_records ({c}) SELECT {c} FROM {s}").format(
            c=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
            s=sql.Identifier(SAMPLE_TABLE),
        )
    )
    customers = _customers(conn, "{}")
    reached = set(customers)
    conn.execute(
        sql.SQL(
            "CREATE TEMP TABLE IF NOT EXISTS {} (customer text PRIMARY KEY, stand_in text)"
        ).format(sql.Identifier(STAND_INS_TABLE))
    )
    conn.commit()
    written, copy = size, 0
    whole, part = _copy_sql(columns, part=False), _copy_sql(columns, part=True)
    while written < rows:
        copy += 1
        n = min(size, rows - written)
        users = customers if n == size else _customers(conn, _first_rows("end_user"), n)
        turned: dict[str, str] = {}
        if populations:  # else the table stays empty: every customer is themselves
            turned = dict(copy_stand_ins(users, populations, copy))
            conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(STAND_INS_TABLE)))
            copy_lines(conn, STAND_INS_TABLE, ("customer", "stand_in"), turned.items())
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(STAND_INS_TABLE)))
        reached.update(turned.get(u, u) for u in users)
        params: dict[str, Any] = {"copy": copy, "end": end}
        if n < size:
            params["rows"] = n
        written += conn.execute(part if n < size else whole, params).rowcount
        conn.commit()
        if progress:
            progress(written)
    return written, len(reached)


def _customers(conn: psycopg.Connection[Any], source: str, rows: int = 0) -> list[str]:
    """The distinct end users of `source` (a relation over the sample, `{}` its name)."""
    query = sql.SQL("SELECT DISTINCT end_user FROM " + source + " AS s WHERE end_user IS NOT NULL")
    params = {"rows": rows} if rows else None
    return [u for (u,) in conn.execute(query.format(sql.Identifier(SAMPLE_TABLE)), params)]
