"""Migration 0014 converts latency rollups of the old shape (one row per bin, 32 bins per
ln) without losing a request: recomputed from raw rows where they remain, moved bin by
bin for the days retention pruned."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine, text

from db.analytics import rollup_sql
from db.engine import libpq_url, make_engine
from db.migrate import upgrade
from tests.db.analytics.test_rollups import END, varied
from tests.fixtures.database import scratch_database

_OLD_TABLE = """
CREATE TABLE {t} (bucket timestamptz NOT NULL, app text NOT NULL, team text, model text,
  provider text, endpoint text NOT NULL, metric text NOT NULL, bin integer NOT NULL,
  requests bigint NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX ux_{t}_key ON {t} (bucket, app, team, model, provider, endpoint,
  metric, bin) NULLS NOT DISTINCT
"""
# what the trigger of revision 0013 folded: one row per bin at 32 bins per ln
_OLD_FOLD = """
INSERT INTO {t} SELECT date_trunc('{g}', r.started_at, 'UTC'), r.app, r.team, r.model,
  r.provider, r.endpoint, m.metric, floor(ln(1 + m.ms::float8) * 32)::int, count(*)
FROM usage_records r CROSS JOIN LATERAL (VALUES ('latency', r.latency_ms),
  ('ttft', r.ttft_ms)) AS m(metric, ms)
WHERE r.status = 'ok' AND m.ms IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
"""
_BY_DAY = (
    "SELECT date_trunc('day', bucket, 'UTC'), app, team, model, metric, sum(requests)"
    " FROM {t} GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"
)


@pytest.fixture
def scratch(database_url: str) -> Iterator[str]:
    with scratch_database(database_url, "costgate_migration_0014", migrate=False) as url:
        yield url


def _old_shape(engine: Engine) -> None:
    """Turn the latency rollups into what revision 0013 kept before this change."""
    with engine.begin() as conn:
        for grain in rollup_sql.GRAINS:
            t = rollup_sql.LATENCY_TABLES[grain]
            conn.execute(text(f"DROP TABLE {t}"))
            for statement in _OLD_TABLE.format(t=t).split(";"):
                conn.execute(text(statement))
            conn.execute(text(_OLD_FOLD.format(t=t, g=grain)))
        conn.execute(text("UPDATE alembic_version SET version_num = '0013'"))


def test_0014_converts_old_latency_rollups_keeping_every_request(scratch: str) -> None:
    from gateway.ledger.rows import COLUMNS, record_row

    upgrade(scratch, "0014")
    rows = [varied(i, END - dt.timedelta(hours=5 * i)) for i in range(120)]  # 25 days
    marks = ", ".join(["%s"] * len(COLUMNS))
    with psycopg.connect(libpq_url(scratch)) as conn:  # as the writer of 0014 wrote them
        conn.cursor().executemany(
            f"INSERT INTO usage_records ({', '.join(COLUMNS)}) VALUES ({marks})",
            [record_row(r) for r in rows],
        )
    engine = make_engine(scratch)
    try:
        _old_shape(engine)
        with engine.begin() as conn:  # retention pruned the oldest ten days' raw rows
            before = {
                g: conn.execute(text(_BY_DAY.format(t=rollup_sql.LATENCY_TABLES[g]))).all()
                for g in rollup_sql.GRAINS
            }
            cutoff = (END - dt.timedelta(days=15)).replace(hour=0, minute=0, second=0)
            conn.execute(text(f"SET LOCAL {rollup_sql.KEEP_ROLLUPS_SETTING} = 'on'"))
            conn.execute(text("DELETE FROM usage_records WHERE started_at < :c"), {"c": cutoff})
            conn.execute(text("UPDATE usage_rollup_state SET pruned_before = :c"), {"c": cutoff})
        upgrade(scratch)
        with engine.connect() as conn:
            for grain in rollup_sql.GRAINS:
                table = rollup_sql.LATENCY_TABLES[grain]
                # every request of every day, group and metric is still counted
                assert conn.execute(text(_BY_DAY.format(t=table))).all() == before[grain]
                # each row's histogram adds up to its requests
                bad = conn.execute(
                    text(
                        f"SELECT count(*) FROM {table} WHERE requests <> (SELECT sum(n)"
                        " FROM unnest(bins) AS n) OR cardinality(bins) <> :nbins"
                    ),
                    {"nbins": rollup_sql.NBINS},
                ).scalar_one()
                assert bad == 0
            # retained days: exactly what the trigger folds today (a rebuild changes nothing)
            kept = text(
                f"SELECT * FROM {rollup_sql.LATENCY_TABLES['hour']} WHERE bucket >= :c"
                " ORDER BY bucket, app, team, model, metric"
            )
            converted = conn.execute(kept, {"c": cutoff}).all()
        with engine.begin() as conn:
            conn.execute(
                text("SELECT usage_rollup_rebuild(:c, :e)"),
                {"c": cutoff, "e": END + dt.timedelta(days=1)},
            )
        with engine.connect() as conn:
            assert conn.execute(kept, {"c": cutoff}).all() == converted
    finally:
        engine.dispose()
