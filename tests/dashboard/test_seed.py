from __future__ import annotations

import datetime as dt
import os

import pandas as pd
from sqlalchemy import text

from db.partitions.sql import week_name
from gateway.devtools.seed import APPS, holds_seeded, remove_seeded, seed_ledger
from gateway.domain.config import default_config_path, load_config
from gateway.domain.pricing import PriceCatalog, TokenUsage
from tests.dashboard.support.ledger import insert_records
from tests.dashboard.support.records import record

CFG = load_config(default_config_path())
END = dt.datetime(2026, 11, 20, 12, tzinfo=dt.UTC)


def _mondays(end: dt.datetime, days: int) -> set[dt.date]:
    start = (end - dt.timedelta(days=days)).date()
    return {
        d - dt.timedelta(days=d.weekday())
        for d in (start + dt.timedelta(days=i) for i in range(days + 1))
    }


def test_seeded_rows_are_priced_by_the_gateway_catalog(database_url, ledger_engine, empty_usage):
    report = seed_ledger(database_url, CFG, 2000, days=10, end=END, seed=5)
    assert report.rows == 2000 and report.apps == len(APPS)
    with ledger_engine.connect() as conn:
        result = conn.execute(
            text("SELECT *, tableoid::regclass::text AS partition FROM usage_records"
                 " ORDER BY started_at")
        )  # fmt: skip
        rows = pd.DataFrame(result.fetchall(), columns=list(result.keys()))
        key_apps = dict(
            conn.execute(
                text("SELECT k.id::text, a.name FROM api_keys k JOIN apps a ON a.id = k.app_id")
            ).all()
        )
    assert len(rows) == 2000
    # every week of the history has its partition: the default one takes none of them
    assert set(rows["partition"]) <= {week_name(d) for d in _mondays(END, days=10)}
    assert rows["started_at"].min() >= END - dt.timedelta(days=10)
    assert rows["started_at"].max() < END
    assert set(rows["app"]) == {a.name for a in APPS}
    assert all(key_apps[str(k)] == a for k, a in zip(rows["key_id"], rows["app"], strict=True))
    catalog = PriceCatalog.from_config(CFG)
    priced = rows[rows["actual_cost_usd"].notna()]
    assert len(priced) > 1800
    for r in priced.itertuples():
        expected = catalog.price(
            r.model,
            TokenUsage(
                prompt_tokens=int(r.prompt_tokens),
                cached_prompt_tokens=int(r.cached_prompt_tokens),
                completion_tokens=int(r.completion_tokens),
            ),
            baseline_model=r.baseline_model,
        )
        # a response-cache hit is billed 0, its list and baseline priced as if served
        assert (r.actual_cost_usd, r.list_cost_usd, r.baseline_cost_usd) == (
            0 if r.cache_hit else expected.actual_cost_usd,
            expected.list_cost_usd,
            expected.baseline_cost_usd,
        )
        assert r.price_version_id == expected.price_version_id
    hits = rows[rows["cache_hit"]]
    assert 0 < len(hits) < 0.1 * len(rows) and (hits["status"] == "ok").all()
    assert (hits["attempts"] == 0).all() and hits["upstream_latency_ms"].isna().all()
    failed = rows[rows["status"] == "upstream_error"]
    assert len(failed) and failed["actual_cost_usd"].isna().all()
    assert rows["fallback_path"].map(len).max() >= 2
    # the seeded history moves `auto` half-way, as its audit row says
    auto = rows[rows["alias"] == "auto"]
    early = auto[auto["started_at"] < END - dt.timedelta(days=5)]["model"]
    late = auto[auto["started_at"] >= END - dt.timedelta(days=5)]["model"]
    assert (early == "claude-sonnet-4.5").mean() > (late == "claude-sonnet-4.5").mean()


def test_seeded_rows_are_marked_and_removable(database_url, ledger_engine, empty_usage):
    seed_ledger(database_url, CFG, 300, days=3, end=END, seed=5)
    insert_records(ledger_engine, [record(started_at=END - dt.timedelta(hours=1))])
    with ledger_engine.connect() as conn:
        ids = [r[0] for r in conn.execute(text("SELECT request_id FROM usage_records"))]
    assert sorted(i.version for i in ids) == [4] + [8] * 300  # the gateway's ids: version 4
    assert holds_seeded(database_url)
    assert remove_seeded(database_url) == 300
    assert not holds_seeded(database_url)
    with ledger_engine.connect() as conn:
        left = conn.execute(text("SELECT count(*) FROM usage_records")).scalar()
        seeded_changes = conn.execute(
            text("SELECT count(*) FROM routing_changes WHERE actor = 'seed'")
        ).scalar()
    assert left == 1 and seeded_changes == 0


MEASURES = (
    "requests", "prompt_tokens", "completion_tokens", "cached_prompt_tokens",
    "actual_cost_usd", "list_cost_usd", "savings_usd",
)  # fmt: skip
RAW_MEASURES = (
    "count(*)", "coalesce(sum(prompt_tokens), 0)", "coalesce(sum(completion_tokens), 0)",
    "coalesce(sum(cached_prompt_tokens), 0)", "sum(actual_cost_usd)", "sum(list_cost_usd)",
    "sum(list_cost_usd - actual_cost_usd)",
)  # fmt: skip
# each rollup against the raw rows it sums: (table, its group, the raw rows' group, source)
ROLLUPS = (
    ("usage_rollup_user_daily", "app, team, end_user", "app, team, end_user",
     "usage_records WHERE end_user IS NOT NULL"),
    ("usage_rollup_tag_daily", "app, team, tag_key, tag_value", "app, team, k, v",
     "usage_records CROSS JOIN LATERAL jsonb_each_text(tags) AS t(k, v)"),
    ("usage_rollup_session_daily", "app, team, end_user, session_id",
     "app, team, end_user, session_id", "usage_records WHERE session_id IS NOT NULL"),
)  # fmt: skip


def test_seeded_rows_carry_end_users_sessions_and_tags(database_url, ledger_engine, empty_usage):
    report = seed_ledger(database_url, CFG, 20_000, days=10, end=END, seed=5, end_users=2_000)
    with ledger_engine.connect() as conn:
        rows = pd.DataFrame(
            conn.execute(
                text(
                    "SELECT app, end_user, session_id, tags FROM usage_records"
                    " ORDER BY started_at, request_id"
                )
            ).all()
        )
    users = rows["end_user"].dropna()
    assert report.end_users == users.nunique() and 1_000 < report.end_users <= 2_000
    assert 0.85 < len(users) / len(rows) < 0.95  # internal jobs have no end user
    per_user = users.value_counts()
    assert per_user.iloc[:10].sum() > 0.1 * len(users)  # a heavy head
    assert per_user.median() < per_user.mean() / 2  # and a long tail
    assert (users.groupby(rows["app"]).nunique() > 50).all()
    # tags come back from JSONB as the dicts written; about 50 values in all
    assert all(isinstance(t, dict) and {"feature", "env"} <= t.keys() for t in rows["tags"])
    values = {pair for t in rows["tags"] for pair in t.items()}
    assert report.tag_values == len(values) == 50
    # a session: up to 20 requests of one end user in one app
    sessions = rows.dropna(subset=["session_id"]).groupby("session_id")
    assert (sessions["end_user"].nunique() == 1).all() and (sessions["app"].nunique() == 1).all()
    sizes = sessions.size()
    assert sizes.max() == 20 and sizes.min() == 1 and 3 < sizes.mean() < 7
    assert rows["session_id"].isna().equals(rows["end_user"].isna())


def test_the_attribution_rollups_equal_the_seeded_rows_sums(
    database_url, ledger_engine, empty_usage
):
    seed_ledger(database_url, CFG, 5_000, days=4, end=END, seed=9, end_users=300)
    with ledger_engine.connect() as conn:
        for table, group, raw_group, source in ROLLUPS:
            rolled = (
                f"SELECT {group}, {', '.join(f'sum({m})' for m in MEASURES)}"
                f" FROM {table} GROUP BY {group}"
            )
            raw = (
                f"SELECT {raw_group}, {', '.join(RAW_MEASURES)} FROM {source} GROUP BY {raw_group}"
            )
            groups = conn.execute(text(f"SELECT count(*) FROM ({rolled}) g")).scalar()
            differ = conn.execute(
                text(
                    f"SELECT count(*) FROM (({rolled}) EXCEPT ({raw}) UNION ALL"
                    f" ({raw}) EXCEPT ({rolled})) d"
                )
            ).scalar()
            assert groups and groups > 20 and differ == 0, table


def test_the_seed_command_takes_an_end_user_population_and_counts_what_it_wrote(
    database_url, empty_usage
):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "seed", "--rows", "3000", "--days", "90",
         "--end-users", "100000"],
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("seeded 3,000 requests from ")
    # 3,000 requests reach a few hundred of 100,000 customers: the heavy ones, again and again
    written = int(summary.split("; ")[1].split(" distinct end users")[0].replace(",", ""))
    assert 100 < written < 2_700
    assert summary.endswith(" distinct end users, 50 distinct tag values")


def _by_hour(engine, where: str) -> dict[tuple, tuple]:
    q = (
        "SELECT date_trunc('hour', started_at, 'UTC'), app, model, count(*),"
        " coalesce(sum(prompt_tokens), 0), sum(actual_cost_usd), sum(ended_at - started_at)"
        f" FROM usage_records WHERE {where} GROUP BY 1, 2, 3"
    )
    with engine.connect() as conn:
        return {tuple(r[:3]): tuple(r[3:]) for r in conn.execute(text(q))}


def test_past_its_sample_the_database_copies_it_hour_for_hour(
    database_url, ledger_engine, empty_usage
):
    # the sample alone first: the same seed draws the same rows, ids included
    seed_ledger(database_url, CFG, 1000, days=6, end=END, seed=5, sample_rows=1000)
    with ledger_engine.connect() as conn:
        sample_ids = [str(r[0]) for r in conn.execute(text("SELECT request_id FROM usage_records"))]
        sample_sessions = conn.execute(
            text("SELECT count(DISTINCT session_id) FROM usage_records")
        ).scalar()
    sample = _by_hour(ledger_engine, "true")
    assert remove_seeded(database_url) == 1000

    report = seed_ledger(database_url, CFG, 3000, days=6, end=END, seed=5, sample_rows=1000)
    assert report.rows == 3000
    with ledger_engine.connect() as conn:
        ids = [r[0] for r in conn.execute(text("SELECT request_id FROM usage_records"))]
        latest = conn.execute(text("SELECT max(started_at) FROM usage_records")).scalar()
        sessions = conn.execute(
            text("SELECT count(DISTINCT session_id), count(session_id) FROM usage_records")
        ).one()
        rolled = conn.execute(text("SELECT sum(requests) FROM usage_rollup_user_daily")).scalar()
        with_user = conn.execute(
            text("SELECT count(*) FROM usage_records WHERE end_user IS NOT NULL")
        ).scalar()
    assert len(set(ids)) == 3000 and {i.version for i in ids} == {8}
    assert latest < END
    # two copies: in every hour, app and model, twice the sample's requests, tokens, costs
    # and durations (a copy keeps each row's hour and length; its customers are the
    # sample's or their stand-ins: the next test)
    ids_sql = ", ".join(f"'{i}'" for i in sample_ids)
    assert _by_hour(ledger_engine, f"request_id IN ({ids_sql})") == sample
    copies = _by_hour(ledger_engine, f"request_id NOT IN ({ids_sql})")
    assert copies.keys() == sample.keys()
    assert all(copies[k] == tuple(None if v is None else 2 * v for v in sample[k]) for k in sample)
    # each copy's sessions are its own
    distinct, carried = sessions
    assert carried > 1000 and sample_sessions and distinct == 3 * sample_sessions
    assert rolled == with_user  # the rollups folded every copy
    assert remove_seeded(database_url) == 3000

    # a last copy of part of the sample
    report = seed_ledger(database_url, CFG, 2600, days=6, end=END, seed=5, sample_rows=1000)
    assert report.rows == 2600
    with ledger_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM usage_records")).scalar() == 2600
        # the report counts the end users of the part copied last too
        users = conn.execute(text("SELECT count(DISTINCT end_user) FROM usage_records"))
        assert report.end_users == users.scalar()


def test_copies_reach_customers_the_sample_missed_and_keep_each_plan_and_session_whole(
    database_url, ledger_engine, empty_usage
):
    report = seed_ledger(
        database_url, CFG, 3000, days=6, end=END, seed=5, sample_rows=1000, end_users=60_000
    )
    assert report.rows == 3000
    q = {
        # rows and distinct end users of the sample (copy 0) and of each copy
        "per_copy": "SELECT coalesce(substring(session_id from '-([0-9]+)$'), '0') AS copy,"
        " count(*), count(DISTINCT end_user) FROM usage_records WHERE session_id IS NOT NULL"
        " GROUP BY 1 ORDER BY 1",
        "users": "SELECT count(DISTINCT end_user) FROM usage_records",
        "sample_users": "SELECT count(DISTINCT end_user) FROM usage_records"
        " WHERE session_id !~ '-[0-9]+$'",
        # a customer's plan tag is their rank's, in every copy
        "plans": "SELECT max(n) FROM (SELECT count(DISTINCT tags->>'plan') AS n"
        " FROM usage_records WHERE end_user IS NOT NULL GROUP BY end_user) AS p",
        # a session is still one customer's
        "sessions": "SELECT max(n) FROM (SELECT count(DISTINCT end_user) AS n"
        " FROM usage_records WHERE session_id IS NOT NULL GROUP BY session_id) AS s",
        "rolled": "SELECT sum(requests) FROM usage_rollup_user_daily",
        "with_user": "SELECT count(*) FROM usage_records WHERE end_user IS NOT NULL",
    }
    with ledger_engine.connect() as conn:
        got = {k: conn.execute(text(v)).all() for k, v in q.items()}
    per_copy = got["per_copy"]
    assert [c for c, _, _ in per_copy] == ["0", "1", "2"]
    # each copy has the sample's rows and as many customers (a bijection), not the same
    assert len({(n, users) for _, n, users in per_copy}) == 1
    sample_users = got["sample_users"][0][0]
    assert got["users"][0][0] > 1.2 * sample_users
    assert report.end_users == got["users"][0][0]
    assert got["plans"][0][0] == 1 and got["sessions"][0][0] == 1
    assert got["rolled"] == got["with_user"]
    assert remove_seeded(database_url) == 3000
