"""The SQL cube equals the pandas cube built from the same raw rows: one aggregation layer."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pandas as pd
import pytest
import streamlit as st
from sqlalchemy import text

from dashboard import queries
from dashboard.cube import CUBE_COLUMNS, DIMENSIONS, dsum, records_to_cube
from dashboard.filters import Filters
from dashboard.latency import latency_table
from dashboard.spend import breakdown, export_frame, totals
from gateway.devtools.seed import seed_ledger
from gateway.domain.config import default_config_path, load_config
from gateway.domain.pricing import PriceCatalog
from tests.dashboard.support.ledger import insert_records, sql_sums
from tests.dashboard.support.records import failed, record

CFG = load_config(default_config_path())
CATALOG = PriceCatalog.from_config(CFG)
END = dt.datetime(2026, 11, 20, 15, 30, tzinfo=dt.UTC)


@pytest.fixture
def seeded(database_url, ledger_engine, empty_usage):
    st.cache_data.clear()
    st.cache_resource.clear()
    seed_ledger(database_url, CFG, 3000, days=20, end=END, seed=11)
    missing = record(
        started_at=END - dt.timedelta(hours=2),
        usage_source="missing",
        prompt_tokens=None,
        completion_tokens=None,
        cached_prompt_tokens=None,
        actual_cost=None,
        actual_cost_usd=None,
        list_cost_usd=None,
        baseline_cost_usd=None,
        price_version_id=None,
    )
    insert_records(ledger_engine, [missing, failed(started_at=END - dt.timedelta(hours=1))])
    return database_url


def discounts() -> dict:
    return {
        v.id: v.list_rates.input - v.list_rates.cached_input
        for v in CATALOG.versions.values()
        if v.list_rates.cached_input is not None
    }


def sorted_cube(cube: pd.DataFrame) -> pd.DataFrame:
    keys = list(DIMENSIONS)
    return cube.sort_values(keys, na_position="first").reset_index(drop=True).fillna("∅")


@pytest.mark.parametrize("days", [20, 2])
def test_sql_cube_equals_pandas_cube_of_the_same_rows(seeded, ledger_engine, days):
    filters = Filters(END.date() - dt.timedelta(days=days - 1), END.date())
    with ledger_engine.connect() as conn:
        # not pd.read_sql: it would turn NUMERIC into float
        result = conn.execute(
            text("SELECT * FROM usage_records WHERE started_at >= :s AND started_at < :e"),
            {"s": filters.start_at, "e": filters.end_at},
        )
        raw = pd.DataFrame(result.fetchall(), columns=list(result.keys()))
    expected = sorted_cube(records_to_cube(raw, filters.grain, discounts()))
    actual = sorted_cube(queries.cube(seeded, filters))
    assert len(actual) == len(expected) > 0
    for column in CUBE_COLUMNS:
        assert actual[column].tolist() == expected[column].tolist(), column


def test_totals_reconcile_with_plain_sql_sums(seeded, ledger_engine):
    filters = Filters(END.date() - dt.timedelta(days=29), END.date(), apps=("search",))
    t = totals(queries.cube(seeded, filters))
    sums = sql_sums(ledger_engine, "app = 'search'")
    assert t.requests == sums["requests"] > 100
    assert t.spend_usd == sums["spend"]
    assert t.list_spend_usd == sums["list_spend"]
    assert t.savings_usd == sums["savings"]
    assert t.routing_savings_usd == sums["routing_savings"]
    assert t.tokens == sums["tokens"]
    assert t.errors == sums["errors"]


def test_dimension_filters_and_values(seeded):
    values = queries.dimension_values(seeded)
    assert "search" in values["app"] and "relay" in values["provider"]
    assert "platform" in values["team"]
    f = Filters(END.date() - dt.timedelta(days=29), END.date(), providers=("relay",))
    cube = queries.cube(seeded, f)
    assert set(cube["provider"]) == {"relay"}


def test_latency_percentiles_from_histograms_are_within_a_bin_of_exact(seeded, ledger_engine):
    f = Filters(END.date() - dt.timedelta(days=29), END.date())
    table = latency_table(queries.histogram(seeded, f)).set_index("model")
    with ledger_engine.connect() as conn:
        exact = dict(
            conn.execute(
                text(
                    "SELECT model, percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) "
                    "FROM usage_records WHERE status = 'ok' GROUP BY model"
                )
            ).all()
        )
        ok = conn.execute(text("SELECT count(*) FROM usage_records WHERE status = 'ok'")).scalar()
    for model, p95 in exact.items():
        assert abs(table.loc[model, "latency_p95_ms"] - p95) <= 0.04 * p95, model
    assert table["requests"].sum() == ok
    assert (table["latency_p50_ms"] <= table["latency_p99_ms"]).all()
    assert table["ttft_p50_ms"].notna().any()


def test_hourly_view_of_a_short_range_reads_the_ledger_directly(seeded, ledger_engine):
    f = Filters(END.date(), END.date())
    assert f.grain == "hour"
    cube = queries.cube(seeded, f)
    sums = sql_sums(ledger_engine, "started_at >= :s", s=f.start_at)
    assert totals(cube).requests == sums["requests"]
    assert cube["bucket"].dt.minute.eq(0).all() and cube["bucket"].nunique() > 1


def test_request_log_is_newest_first_and_drills_down(seeded):
    f = Filters(END.date() - dt.timedelta(days=29), END.date())
    log = queries.recent_requests(seeded, f, ("upstream_error",), limit=50)
    assert (log["status"] == "upstream_error").all() and len(log) > 0
    assert log["started_at"].is_monotonic_decreasing
    rid = str(log["request_id"].iloc[0])
    assert str(queries.request_by_id(seeded, rid.upper(), team=None)["request_id"]) == rid
    assert queries.request_by_id(seeded, "not-an-id", team=None) is None


def test_routing_change_of_the_seeded_history_is_listed(seeded):
    changes = queries.routing_changes(seeded, CFG.gateway.app_name)
    assert changes["alias"].tolist() == ["auto"]
    assert changes["after"].iloc[0]["deepseek-v3.2"] == "60"


def test_cached_savings_use_the_price_versions(seeded, ledger_engine):
    cube = queries.cube(seeded, Filters(END.date() - dt.timedelta(days=29), END.date()))
    with ledger_engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT price_version_id, sum(cached_prompt_tokens) FROM usage_records "
                "WHERE price_version_id IS NOT NULL GROUP BY 1"
            )
        ).all()
    by_id = {v.id: v for v in CATALOG.versions.values()}
    expected = sum(
        (
            Decimal(tokens)
            * (by_id[pv].list_rates.input - by_id[pv].list_rates.cached_input)
            / 1_000_000
            for pv, tokens in rows
        ),
        Decimal(0),
    )
    assert totals(cube).cached_savings_usd == expected > 0


def test_export_rows_equal_a_plain_group_by(seeded, ledger_engine):
    f = Filters(END.date() - dt.timedelta(days=29), END.date())
    out = export_frame(queries.cube(seeded, f))
    with ledger_engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), app, team, "
                "key_id::text, model, provider, count(*), sum(actual_cost_usd), "
                "sum(list_cost_usd) FROM usage_records GROUP BY 1, 2, 3, 4, 5, 6"
            )
        ).all()
    expected = {
        (d, a, t or "", k or "", m or "", p or ""): (n, s, ls)
        for d, a, t, k, m, p, n, s, ls in rows
    }
    got = {
        (r.day, r.app, r.team or "", r.key_id or "", r.model or "", r.provider or ""): (
            r.requests, r.spend_usd, r.list_spend_usd)
        for r in out.itertuples()
    }  # fmt: skip
    assert got == expected


def test_a_team_scope_keeps_every_query_to_that_teams_rows(seeded, ledger_engine):
    month = Filters(END.date() - dt.timedelta(days=29), END.date(), team_scope="platform")
    sums = sql_sums(ledger_engine, "team = 'platform'")
    assert totals(queries.cube(seeded, month)).requests == sums["requests"] > 0
    # a team picked in the URL cannot widen the scope: it only narrows it, to nothing here
    other = dataclasses.replace(month, teams=("customer",))
    assert totals(queries.cube(seeded, other)).requests == 0
    # the histograms come summed over teams: their count is the team's successful requests
    ok = sql_sums(ledger_engine, "team = 'platform' AND status = 'ok'")["requests"]
    hist = queries.histogram(seeded, month)
    assert hist.loc[hist["metric"] == "latency", "requests"].sum() == ok > 0
    hourly = dataclasses.replace(month, start=END.date())  # from the hourly rollup
    assert hourly.grain == "hour"
    assert set(queries.cube(seeded, hourly)["team"]) == {"platform"}
    log = queries.recent_requests(seeded, month, limit=1000)
    assert set(log["team"]) == {"platform"}
    with ledger_engine.connect() as conn:
        foreign = conn.execute(
            text("SELECT request_id::text FROM usage_records WHERE team = 'customer' LIMIT 1")
        ).scalar_one()
    assert queries.request_by_id(seeded, foreign, team="platform") is None
    assert queries.request_by_id(seeded, foreign, team=None) is not None
    values = queries.dimension_values(seeded, "platform")
    assert values["team"] == ["platform"]
    assert set(values["app"]) == {"search", "internal-tools"}


def test_ledger_bounds_and_a_range_from_1900(seeded, ledger_engine):
    with ledger_engine.connect() as conn:
        first, last = conn.execute(
            text(
                "SELECT min(started_at AT TIME ZONE 'UTC')::date, "
                "max(started_at AT TIME ZONE 'UTC')::date FROM usage_records"
            )
        ).one()
    assert queries.ledger_bounds(seeded) == (first, last)
    everything = Filters(dt.date(1900, 1, 1), END.date())
    assert totals(queries.cube(seeded, everything)).requests == sql_sums(ledger_engine)["requests"]


def test_an_empty_ledger_has_no_bounds(database_url, empty_usage):
    st.cache_data.clear()
    assert queries.ledger_bounds(database_url) == (None, None)


def test_the_endpoint_is_a_filter_and_its_totals_reconcile(seeded, ledger_engine):
    values = queries.dimension_values(seeded)
    assert {"chat.completions", "responses"} <= set(values["endpoint"])
    f = Filters(END.date() - dt.timedelta(days=29), END.date(), endpoints=("responses",))
    cube = queries.cube(seeded, f)
    assert set(cube["endpoint"]) == {"responses"}
    t = totals(cube)
    sums = sql_sums(ledger_engine, "endpoint = 'responses'")
    assert t.requests == sums["requests"] > 50
    assert t.spend_usd == sums["spend"] and t.tokens == sums["tokens"]


def test_savings_waterfall_adds_up_to_the_headline_to_the_cent(seeded, ledger_engine):
    """Saved against no costgate, from plain SQL over the raw rows, equals the page's
    headline; its steps (cache hits and a relay among them) add up to it exactly, and
    in cents as the waterfall draws them."""
    filters = Filters(END.date() - dt.timedelta(days=29), END.date())
    split = totals(queries.cube(seeded, filters)).savings
    with ledger_engine.connect() as conn:
        no_costgate, billed, hits, relay = conn.execute(
            text(
                "SELECT sum(coalesce(r.baseline_cost_usd, r.list_cost_usd)"
                "   + coalesce(r.cached_prompt_tokens * (pv.list_input - pv.list_cached_input)"
                "     * 0.000001, 0)),"
                " sum(r.actual_cost_usd),"
                " sum(r.list_cost_usd) FILTER (WHERE r.cache_hit),"
                " sum(r.list_cost_usd - r.actual_cost_usd) FILTER (WHERE r.provider = 'relay'"
                "   AND NOT r.cache_hit)"
                " FROM usage_records r LEFT JOIN price_versions pv ON pv.id = r.price_version_id"
                " WHERE r.actual_cost_usd IS NOT NULL"
            )
        ).one()
    assert split.no_costgate_usd == no_costgate
    assert split.billed_usd == billed
    assert split.saved_usd == no_costgate - billed > 0
    assert split.steps["cache_hits"] == hits > 0
    # the other providers bill their list price: the relay's ¥1 per $1 at ¥7.3 is all of it
    assert split.steps["provider_price_fx"] == relay > 0
    assert all(split.steps[s] > 0 for s in ("routing", "cached_tokens"))
    assert sum(split.steps.values()) == split.saved_usd
    cents = split.in_cents()
    assert cents.no_costgate_usd == round(no_costgate, 2)
    assert cents.saved_usd == round(no_costgate - billed, 2)
    assert sum(cents.steps.values()) == cents.saved_usd == cents.no_costgate_usd - cents.billed_usd
    assert abs(cents.billed_usd - round(billed, 2)) <= Decimal("0.01")


@pytest.mark.parametrize("dims", [queries.OVERVIEW_DIMS, queries.SAVINGS_DIMS])
def test_a_cube_of_fewer_dimensions_has_the_same_figures(seeded, dims):
    filters = Filters(END.date() - dt.timedelta(days=29), END.date())
    full = queries.cube(seeded, filters)
    some = queries.cube(seeded, filters, dims=dims)
    assert len(some) < len(full)
    assert totals(some) == totals(full)
    for by in [d for d in dims if d != "status"]:
        assert breakdown(some, by).equals(breakdown(full, by))
    dropped = [d for d in DIMENSIONS[1:] if d not in dims]
    assert some[dropped].isna().all().all()


def test_one_histogram_per_bucket_gives_the_same_percentiles(seeded):
    from dashboard.latency import latency_quantile

    f = Filters(END.date() - dt.timedelta(days=29), END.date())
    by_model = queries.histogram(seeded, f)
    merged = queries.histogram(seeded, f, per_model=False)
    assert len(merged) < len(by_model) and merged["model"].isna().all()
    assert merged["requests"].sum() == by_model["requests"].sum()
    for q in (0.5, 0.95, 0.99):
        assert latency_quantile(merged, q) == latency_quantile(by_model, q)


def test_the_export_carries_the_savings_split_adding_up_to_the_pages(seeded):
    f = Filters(END.date() - dt.timedelta(days=29), END.date())
    cube = queries.cube(seeded, f)
    out = export_frame(cube)
    split = totals(cube).savings
    assert dsum(out["no_costgate_usd"]) == split.no_costgate_usd
    assert dsum(out["saved_usd"]) == split.saved_usd
    for step in ("routing", "cached_tokens", "provider_price_fx", "cache_hits"):
        assert dsum(out[f"saved_{step}_usd"]) == split.steps[step]
    priced = out[out["saved_usd"].notna()]
    assert all(
        r.saved_usd
        == r.saved_routing_usd
        + r.saved_cached_tokens_usd
        + r.saved_provider_price_fx_usd
        + r.saved_cache_hits_usd
        for r in priced.itertuples()
    )
