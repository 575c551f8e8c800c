"""Rollups kept by PostgreSQL equal plain SQL over the ledger: through the real writer,
with late and replayed rows, two writers at once, deletes, rebuilds and retention."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import random
import uuid
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, text

from dashboard.latency import BINS_PER_LN
from db.analytics import rollup_sql
from db.analytics.rollups import prune, rebuild_all, retention_cutoff, status
from gateway.devtools.seed import seed_ledger
from gateway.domain.config import default_config_path, load_config
from gateway.domain.usage_record import RequestStatus, UsageRecord
from gateway.ledger.database import LedgerDatabase
from tests.gateway.ledger.support import make_record

CFG = load_config(default_config_path())
END = dt.datetime(2026, 11, 20, 15, 30, tzinfo=dt.UTC)
KEYS = [uuid.uuid4() for _ in range(3)]

# every measure, written apart from rollup_sql on purpose: raw SQL over usage_records
RAW_MEASURES = """
    count(*) AS requests,
    coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
    coalesce(sum(cached_prompt_tokens), 0) AS cached_prompt_tokens,
    coalesce(sum(completion_tokens), 0) AS completion_tokens,
    coalesce(sum(reasoning_tokens), 0) AS reasoning_tokens,
    coalesce(sum(cache_write_tokens), 0) AS cache_write_tokens,
    coalesce(sum(trimmed_tokens), 0) AS trimmed_tokens,
    count(*) FILTER (WHERE stream) AS stream_requests,
    count(*) FILTER (WHERE cache_hit) AS cache_hit_requests,
    sum(actual_cost) AS actual_cost,
    sum(actual_cost_usd) AS actual_cost_usd,
    sum(list_cost_usd) AS list_cost_usd,
    sum(baseline_cost_usd) AS baseline_cost_usd,
    sum(list_cost_usd - actual_cost_usd) AS savings_usd
"""
ROLLUP_MEASURES = """
    sum(requests) AS requests, sum(prompt_tokens) AS prompt_tokens,
    sum(cached_prompt_tokens) AS cached_prompt_tokens,
    sum(completion_tokens) AS completion_tokens, sum(reasoning_tokens) AS reasoning_tokens,
    sum(cache_write_tokens) AS cache_write_tokens, sum(trimmed_tokens) AS trimmed_tokens,
    sum(stream_requests) AS stream_requests, sum(cache_hit_requests) AS cache_hit_requests,
    sum(actual_cost) AS actual_cost, sum(actual_cost_usd) AS actual_cost_usd,
    sum(list_cost_usd) AS list_cost_usd, sum(baseline_cost_usd) AS baseline_cost_usd,
    sum(savings_usd) AS savings_usd
"""
GROUPS = "app, team, key_id, model, provider, status, endpoint, billing_currency"


def _norm(rows: list[Any]) -> list[tuple[Any, ...]]:
    # sums come back as int or Decimal depending on the side: compare as Decimal
    return sorted(
        (tuple(Decimal(v) if isinstance(v, int) else v for v in r) for r in rows),
        key=repr,
    )


def raw_by_day(engine: Engine) -> list[tuple[Any, ...]]:
    sql = (
        f"SELECT (started_at AT TIME ZONE 'UTC')::date AS d, {GROUPS}, {RAW_MEASURES}"
        f" FROM usage_records GROUP BY d, {GROUPS}"
    )
    with engine.connect() as conn:
        return _norm(conn.execute(text(sql)).all())


def rollup_by_day(engine: Engine, grain: rollup_sql.Grain) -> list[tuple[Any, ...]]:
    sql = (
        f"SELECT (bucket AT TIME ZONE 'UTC')::date AS d, {GROUPS}, {ROLLUP_MEASURES}"
        f" FROM {rollup_sql.USAGE_TABLES[grain]} GROUP BY d, {GROUPS}"
    )
    with engine.connect() as conn:
        return _norm(conn.execute(text(sql)).all())


def assert_rollups_equal_ledger(engine: Engine) -> None:
    raw = raw_by_day(engine)
    assert raw == rollup_by_day(engine, "hour")
    assert raw == rollup_by_day(engine, "day")
    with engine.connect() as conn:
        for grain in rollup_sql.GRAINS:
            hist = conn.execute(
                text(f"SELECT metric, sum(requests) FROM {rollup_sql.LATENCY_TABLES[grain]}"
                     " GROUP BY metric")
            ).all()
            want = conn.execute(
                text(
                    "SELECT 'latency', count(*) FROM usage_records WHERE status = 'ok'"
                    " UNION ALL SELECT 'ttft', count(ttft_ms) FROM usage_records"
                    " WHERE status = 'ok'"
                )
            ).all()
            assert {m: int(n) for m, n in hist} == {m: int(n) for m, n in want if n}


def varied(i: int, at: dt.datetime) -> UsageRecord:
    """Rows that differ on every dimension and hold NULLs where real rows do."""
    failed = i % 7 == 0
    return make_record(
        started_at=at,
        ended_at=at + dt.timedelta(milliseconds=300),
        app=("search", "support", "checkout")[i % 3],
        team=None if i % 4 == 0 else "payments",
        key_id=KEYS[i % 3],
        model=("deepseek-v3.2", "gpt-4.1")[i % 2],
        provider=("deepseek", "openai")[i % 2],
        status=RequestStatus.UPSTREAM_ERROR if failed else RequestStatus.OK,
        http_status=502 if failed else 200,
        error_class="upstream_5xx" if failed else None,
        prompt_tokens=None if failed else 1000 + i,
        completion_tokens=None if failed else 10 * i,
        actual_cost=None if failed or i % 5 == 0 else Decimal(i) / Decimal(10**7),
        actual_cost_usd=None if failed or i % 5 == 0 else Decimal(i) / Decimal(10**7),
        list_cost_usd=None if failed else Decimal(i) / Decimal(10**6),
        baseline_cost_usd=None if failed else Decimal(i) / Decimal(10**5),
        price_version_id=None,
        cache_hit=i % 11 == 0,
        trimmed_tokens=i if i % 13 == 0 else None,
        ttft_ms=None if i % 3 == 0 else 100 + i,
        latency_ms=200 + 7 * i,
    )


async def write(url: str, batches: list[list[UsageRecord]]) -> None:
    db = LedgerDatabase(url, write_timeout_s=30, connect_timeout_s=5)
    try:
        for batch in batches:
            assert await db.write(batch) == []
    finally:
        await db.close()


def test_rows_written_by_the_writer_are_in_both_rollups_late_and_replayed_ones_too(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    records = [varied(i, END - dt.timedelta(minutes=7 * i)) for i in range(300)]
    asyncio.run(write(database_url, [records[:150], records[150:]]))
    assert_rollups_equal_ledger(ledger_engine)
    # a spool replay after an outage: rows of ten days ago, and rows already written
    late = [varied(i, END - dt.timedelta(days=10, minutes=i)) for i in range(40)]
    asyncio.run(write(database_url, [late + records[:50]]))
    assert_rollups_equal_ledger(ledger_engine)
    assert status(ledger_engine).daily_requests == 340


def test_a_seeded_history_rolls_up_exactly(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    seed_ledger(database_url, CFG, 3000, days=20, end=END, seed=5)
    assert_rollups_equal_ledger(ledger_engine)
    with ledger_engine.connect() as conn:
        # cached savings need the price versions the seed synced: same sum both ways
        want = conn.execute(
            text(
                "SELECT sum(r.cached_prompt_tokens * (pv.list_input - pv.list_cached_input)"
                " * 0.000001) FROM usage_records r JOIN price_versions pv"
                " ON pv.id = r.price_version_id"
            )
        ).scalar_one()
        got = conn.execute(text("SELECT sum(cached_savings_usd) FROM usage_rollup_daily"))
        assert want is not None and got.scalar_one() == want


def test_batches_of_one_hour_fold_their_days_as_batches_across_hours_do(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    # batches inside 15:00-15:30 (the one-hour fold: day groups straight from hour
    # groups), groups repeating within and across batches; then one batch across 14:00
    # and 15:00 of the same day, whose day groups sum two hour groups each
    hour = [varied(i % 20, END - dt.timedelta(minutes=i % 29)) for i in range(400)]
    across = [varied(i % 20, END - dt.timedelta(minutes=20 + i % 40)) for i in range(200)]
    asyncio.run(write(database_url, [hour[:200], hour[200:], across]))
    assert_rollups_equal_ledger(ledger_engine)
    with ledger_engine.connect() as conn:
        before = _norm(conn.execute(text("SELECT * FROM usage_rollup_daily")).all())
    assert rebuild_all(ledger_engine) == 600
    with ledger_engine.connect() as conn:
        assert _norm(conn.execute(text("SELECT * FROM usage_rollup_daily")).all()) == before


def test_two_writers_folding_the_same_groups_at_once_neither_deadlock_nor_lose_rows(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    rng = random.Random(3)
    batches: list[list[list[UsageRecord]]] = [[], []]
    for w in range(2):
        for _ in range(12):
            rows = [varied(rng.randrange(60), END - dt.timedelta(hours=rng.randrange(30)))
                    for _ in range(80)]
            batches[w].append([dataclasses.replace(r, request_id=uuid.uuid4()) for r in rows])

    async def both() -> None:
        await asyncio.gather(write(database_url, batches[0]), write(database_url, batches[1]))

    asyncio.run(both())
    assert status(ledger_engine).raw_rows == 2 * 12 * 80
    assert_rollups_equal_ledger(ledger_engine)


def test_rebuild_gives_the_rollups_the_triggers_kept(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    seed_ledger(database_url, CFG, 1500, days=5, end=END, seed=9)
    tables = [*rollup_sql.USAGE_TABLES.values(), *rollup_sql.LATENCY_TABLES.values()]

    def snapshot() -> list[list[tuple[Any, ...]]]:
        with ledger_engine.connect() as conn:
            return [_norm(conn.execute(text(f"SELECT * FROM {t}")).all()) for t in tables]

    before = snapshot()
    assert all(before)
    assert rebuild_all(ledger_engine) == 1500
    assert snapshot() == before


def test_deleting_rows_rebuilds_their_days_and_truncate_empties_the_rollups(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    records = [varied(i, END - dt.timedelta(hours=5 * i)) for i in range(100)]
    asyncio.run(write(database_url, [records]))
    with ledger_engine.begin() as conn:
        conn.execute(text("DELETE FROM usage_records WHERE app = 'search'"))
    assert_rollups_equal_ledger(ledger_engine)
    assert status(ledger_engine).daily_requests == 66
    with ledger_engine.begin() as conn:
        conn.execute(text("TRUNCATE usage_records"))
    s = status(ledger_engine)
    assert (s.hourly_rows, s.daily_rows) == (0, 0)


def test_pruning_past_retention_deletes_raw_rows_and_keeps_their_rollups(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    records = [varied(i, END - dt.timedelta(hours=6 * i)) for i in range(120)]  # 30 days
    asyncio.run(write(database_url, [records]))
    with ledger_engine.connect() as conn:
        kept = conn.execute(text("SELECT sum(requests), sum(list_cost_usd) FROM "
                                 "usage_rollup_daily")).one()
    cutoff = retention_cutoff(END.date(), 10)
    with ledger_engine.connect() as conn:
        old = conn.execute(
            text("SELECT count(*) FROM usage_records WHERE started_at < :c"), {"c": cutoff}
        ).scalar_one()
    assert old > 0 and prune(ledger_engine, cutoff) == old
    s = status(ledger_engine)
    assert s.raw_rows == 120 - old and s.pruned_before == cutoff
    assert s.first_raw is not None and s.first_raw >= cutoff
    # a rebuild of everything leaves the pruned days' rollups as they were
    rebuild_all(ledger_engine)
    with ledger_engine.connect() as conn:
        after = conn.execute(text("SELECT sum(requests), sum(list_cost_usd) FROM "
                                  "usage_rollup_daily")).one()
        assert tuple(after) == tuple(kept)
        rebuild = conn.execute(
            text("SELECT usage_rollup_rebuild(:a, :b)"),
            {"a": cutoff - dt.timedelta(days=5), "b": cutoff},
        ).scalar_one()
        assert rebuild == 0


def test_latency_bins_are_the_dashboards() -> None:
    assert rollup_sql.BINS_PER_LN == BINS_PER_LN


@pytest.mark.parametrize("grain", rollup_sql.GRAINS)
def test_the_fold_inserts_groups_in_key_order(grain: rollup_sql.Grain) -> None:
    sql = rollup_sql.fold_usage_sql(grain, "new_rows")
    n = len(rollup_sql.usage_conflict_key())
    assert f"ORDER BY {', '.join(str(i) for i in range(1, n + 1))}" in sql


def test_the_migration_backfills_rows_written_before_it(database_url: str) -> None:
    import psycopg
    from sqlalchemy import make_url

    from db.engine import libpq_url, make_engine
    from db.migrate import upgrade
    from gateway.ledger.rows import COLUMNS, record_row
    from tests.gateway.ledger.support import make_record as record

    name = f"costgate_backfill_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(libpq_url(database_url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(database_url).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url, "0005")
        rows = [varied(i, END - dt.timedelta(hours=9 * i)) for i in range(60)]
        # the columns of revision 0005 only: the writer of today writes later ones too
        later = ("end_user", "session_id", "tags", "finish_reason", "refusal", "json_valid",
                 "tool_args_valid", "experiment", "variant", "service_tier",
                 "web_search_calls", "tool_fee_cost")  # fmt: skip
        old = [c for c in COLUMNS if c not in later]
        marks = ", ".join(["%s"] * len(old))
        insert = f"INSERT INTO usage_records ({', '.join(old)}) VALUES ({marks})"
        with psycopg.connect(libpq_url(url)) as conn:
            conn.cursor().executemany(insert, [record_row(r)[: len(old)] for r in rows])
        upgrade(url)
        engine = make_engine(url)
        try:
            assert status(engine).daily_requests == 60
            assert_rollups_equal_ledger(engine)
            # and the triggers work from then on
            asyncio.run(write(url, [[record(started_at=END)]]))
            assert status(engine).daily_requests == 61
        finally:
            engine.dispose()
    finally:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_rebuild_gives_the_attribution_rollups_the_triggers_kept(
    database_url: str, ledger_engine: Engine, clean_ledger: None
) -> None:
    from db.analytics import attribution_sql
    from tests.db.analytics.attribution_seed import write_attributed

    write_attributed(database_url)

    def snapshot() -> list[list[tuple[Any, ...]]]:
        with ledger_engine.connect() as conn:
            return [_norm(conn.execute(text(f"SELECT * FROM {t}")).all())
                    for t in attribution_sql.TABLES]  # fmt: skip

    before = snapshot()
    assert all(before)
    with ledger_engine.connect() as conn:  # the user rollup is the raw rows' sums
        want = conn.execute(text("SELECT count(*), sum(actual_cost_usd) FROM usage_records"
                                 " WHERE end_user IS NOT NULL")).one()  # fmt: skip
        got = conn.execute(text("SELECT sum(requests), sum(actual_cost_usd)"
                                " FROM usage_rollup_user_daily")).one()  # fmt: skip
    assert tuple(got) == tuple(want)
    assert rebuild_all(ledger_engine) == 110
    assert snapshot() == before


def test_a_row_without_tags_is_sql_null_and_a_non_object_tags_value_folds_no_tag(
    ledger_engine: Engine, clean_ledger: None
) -> None:
    from sqlalchemy import insert

    from db.models import UsageRow
    from gateway.ledger.rows import COLUMNS
    from tests.gateway.ledger.support import make_record as record

    untagged = record(started_at=END).to_dict()
    array_tagged = record(started_at=END).to_dict()
    with ledger_engine.begin() as conn:
        # through the model, None is SQL NULL (JSON 'null' would be a value of its own)
        conn.execute(insert(UsageRow), [{c: untagged[c] for c in COLUMNS}])
        # written by another tool: a JSON array neither fails the batch nor counts as tags
        conn.execute(insert(UsageRow), [{c: array_tagged[c] for c in COLUMNS} | {"tags": ["x"]}])
        nulls = "SELECT tags IS NULL FROM usage_records ORDER BY tags NULLS FIRST"
        tags = conn.execute(text(nulls))
        assert [t for (t,) in tags] == [True, False]
        assert conn.execute(text("SELECT count(*) FROM usage_rollup_tag_daily")).scalar_one() == 0
        assert conn.execute(text("SELECT sum(requests) FROM usage_rollup_daily")).scalar_one() == 2
