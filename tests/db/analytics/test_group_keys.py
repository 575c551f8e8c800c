"""The usage rollups' group keys (migration 0016): a ledger folded before the migration
keeps every total, and rows folded after it add to the same groups, never beside them."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text

from db.analytics import rollup_sql
from db.engine import libpq_url, make_engine
from db.migrate import upgrade
from gateway.domain.usage_record import UsageRecord
from tests.db.analytics.test_rollups import END, varied
from tests.fixtures.database import scratch_database

_BY_GROUP = (
    "SELECT bucket, app, team, key_id, model, provider, status, endpoint, price_version_id,"
    " count(*) AS rows, sum(requests), sum(prompt_tokens), sum(actual_cost_usd),"
    " sum(list_cost_usd) FROM {t} GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 1, 2, 3, 4, 5,"
    " 6, 7, 8, 9"
)


@pytest.fixture
def scratch(database_url: str) -> Iterator[str]:
    with scratch_database(database_url, "costgate_migration_0016", migrate=False) as url:
        yield url


def _insert(url: str, rows: list[UsageRecord]) -> None:
    from gateway.ledger.rows import COLUMNS, record_row

    marks = ", ".join(["%s"] * len(COLUMNS))
    with psycopg.connect(libpq_url(url)) as conn:  # one statement per row: one fold each
        conn.cursor().executemany(
            f"INSERT INTO usage_records ({', '.join(COLUMNS)}) VALUES ({marks})",
            [record_row(r) for r in rows],
        )


def _groups(url: str) -> dict[str, list[tuple[object, ...]]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {
                g: [tuple(r) for r in conn.execute(text(_BY_GROUP.format(t=t)))]
                for g, t in rollup_sql.USAGE_TABLES.items()
            }
    finally:
        engine.dispose()


def test_0016_keys_every_group_and_later_rows_add_to_them(scratch: str) -> None:
    upgrade(scratch, "0015")
    first = [varied(i, END - dt.timedelta(hours=3 * i)) for i in range(90)]
    _insert(scratch, first)  # folded by 0015's trigger: the wide key
    before = _groups(scratch)

    upgrade(scratch)
    assert _groups(scratch) == before
    engine = make_engine(scratch)
    try:
        with engine.connect() as conn:
            # every row keyed as the folds key it: a recomputed key finds each row
            for t in rollup_sql.USAGE_TABLES.values():
                stale = conn.execute(
                    text(
                        f"SELECT count(*) FROM {t} u"
                        f" WHERE u.{rollup_sql.GROUP_KEY} <> {rollup_sql.group_key_sql('u')}"
                    )
                ).scalar_one()
                assert stale == 0
    finally:
        engine.dispose()

    # the same rows again (new request ids): every group doubles, no group is added
    again = [varied(i, END - dt.timedelta(hours=3 * i)) for i in range(90)]
    _insert(scratch, again)
    after = _groups(scratch)
    for grain, rows in before.items():
        doubled = [(*r[:10], *(None if v is None else 2 * v for v in r[10:])) for r in rows]
        assert after[grain] == doubled


def test_a_null_and_an_empty_dimension_are_two_groups(scratch: str) -> None:
    import dataclasses

    upgrade(scratch)
    base = varied(0, END)
    # the same row twice but for its team: NULL, then an empty string
    _insert(
        scratch,
        [
            dataclasses.replace(base, team=None),
            dataclasses.replace(base, team="", request_id=uuid.uuid4()),
        ],
    )
    engine = make_engine(scratch)
    try:
        with engine.connect() as conn:
            teams = conn.execute(
                text(f"SELECT team FROM {rollup_sql.USAGE_TABLES['hour']} ORDER BY team")
            ).scalars().all()
    finally:
        engine.dispose()
    assert teams == ["", None]
