from __future__ import annotations

import datetime as dt

import pandas as pd
from sqlalchemy import text

from gateway.devtools.seed import APPS, copy_text, holds_seeded, remove_seeded, seed_ledger
from gateway.domain.config import default_config_path, load_config
from gateway.domain.pricing import PriceCatalog, TokenUsage
from tests.dashboard.support.ledger import insert_records
from tests.dashboard.support.records import record

CFG = load_config(default_config_path())
END = dt.datetime(2026, 11, 20, 12, tzinfo=dt.UTC)


def test_copy_text_escapes_like_postgres_expects():
    assert copy_text(None) == "\\N"
    assert copy_text(True) == "t"
    assert copy_text(["a", 'b"c']) == '{"a","b\\\\"c"}'
    assert copy_text("tab\there") == "tab\\there"


def test_seeded_rows_are_priced_by_the_gateway_catalog(database_url, ledger_engine, empty_usage):
    report = seed_ledger(database_url, CFG, 2000, days=10, end=END, seed=5)
    assert report.rows == 2000 and report.apps == len(APPS)
    with ledger_engine.connect() as conn:
        result = conn.execute(text("SELECT * FROM usage_records ORDER BY started_at"))
        rows = pd.DataFrame(result.fetchall(), columns=list(result.keys()))
        key_apps = dict(
            conn.execute(
                text("SELECT k.id::text, a.name FROM api_keys k JOIN apps a ON a.id = k.app_id")
            ).all()
        )
    assert len(rows) == 2000
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
