"""Web search fees and service tiers through the stored ledger: a price version's tiers
and fees read back from `price_versions`, and the FOCUS export's web search line carries
the ledger's fee sum (raw rows) while the totals still equal the ledger's."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest
import yaml
from sqlalchemy import insert

from db.analytics.finance_ledger import ledger_groups, ledger_totals, load_versions
from db.models import UsageRow
from db.price_sync import sync_prices
from gateway.domain.config import default_config_path, parse_config
from gateway.domain.pricing import PriceCatalog, TokenUsage
from gateway.finance.focus_columns import check_rows
from gateway.finance.focus_rows import focus_rows
from tests.db.analytics.finance_seed import clean_finance_tables

D = Decimal
DAY = dt.date(2026, 11, 20)
pytestmark = pytest.mark.usefixtures("clean_ledger")


def _config() -> Any:
    data = yaml.safe_load(default_config_path().read_text())
    mini = next(m for m in data["models"] if m["name"] == "gpt-4o-mini")
    mini["list_prices"] = {
        "input": "0.15", "output": "0.6", "tool_fees": {"web_search": "0.01"},
        "service_tiers": {"flex": {"input": "0.075", "output": "0.3"}},
    }  # fmt: skip
    return parse_config(data)


def _row(catalog: PriceCatalog, usage: TokenUsage) -> dict[str, Any]:
    priced = catalog.price("gpt-4o-mini", usage)
    started = dt.datetime.combine(DAY, dt.time(12), dt.UTC)
    return {
        "request_id": uuid.uuid4(), "started_at": started,
        "ended_at": started + dt.timedelta(seconds=1), "app": "search", "team": None,
        "key_id": None, "requested_model": "gpt-4o-mini", "alias": None,
        "model": "gpt-4o-mini", "provider": "openai", "stream": False, "status": "ok",
        "http_status": 200, "prompt_tokens": usage.prompt_tokens, "cached_prompt_tokens": 0,
        "completion_tokens": usage.completion_tokens, "reasoning_tokens": 0,
        "usage_source": "provider", "latency_ms": 900, "attempts": 1,
        "fallback_path": ["gpt-4o-mini"], "price_version_id": priced.price_version_id,
        "billing_currency": "USD", "actual_cost": priced.actual_cost,
        "actual_cost_usd": priced.actual_cost_usd, "list_cost_usd": priced.list_cost_usd,
        "service_tier": usage.service_tier,
        "web_search_calls": usage.web_search_calls or None,
        "tool_fee_cost": priced.tool_fee_cost if usage.web_search_calls else None,
    }  # fmt: skip


def test_fees_are_a_focus_line_and_tiers_read_back(ledger_engine):
    clean_finance_tables(ledger_engine)
    cfg = _config()
    sync_prices(ledger_engine, cfg)
    catalog = PriceCatalog.from_config(cfg)
    version = catalog.versions["gpt-4o-mini"]
    stored = load_versions(ledger_engine)[version.id]
    assert stored.billed_rates.canonical() == version.billed_rates.canonical()
    assert stored.list_rates.fee("web_search") == D("0.01")
    searched = TokenUsage(prompt_tokens=1000, completion_tokens=500, web_search_calls=2)
    flex = TokenUsage(prompt_tokens=1000, completion_tokens=500, service_tier="flex")
    rows = [_row(catalog, searched), _row(catalog, searched), _row(catalog, flex)]
    # searched: 1000 × 0.15 + 500 × 0.6 per 1M + 2 × 0.01 = $0.02045; flex: $0.000225
    assert [r["actual_cost"] for r in rows] == [D("0.02045"), D("0.02045"), D("0.000225")]
    with ledger_engine.begin() as conn:
        conn.execute(insert(UsageRow), rows)
    focus = list(focus_rows(ledger_groups(ledger_engine, DAY, DAY)))
    assert check_rows(focus) == []
    (search,) = [r for r in focus if r["x_TokenClass"] == "web_search"]
    assert (search["PricingQuantity"], search["BilledCost"]) == (D(4), D("0.04"))
    assert search["ChargeDescription"] == "gpt-4o-mini web search calls via openai"
    totals = ledger_totals(ledger_engine, DAY, DAY)
    assert sum(r["BilledCost"] for r in focus) == totals["actual_cost_usd"] == D("0.041125")


def test_the_fees_read_only_the_rows_with_web_searches_through_their_index(ledger_engine):
    # at 50,000,000 rows a seq scan of 30 days took 2.3 s for no row (issue 29): the
    # query's filter must imply the partial index's predicate, whatever the plan's costs
    from sqlalchemy import text

    from db.analytics.finance_ledger import _FEES_SQL, _bounds

    with ledger_engine.begin() as conn:
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = conn.execute(text("EXPLAIN " + _FEES_SQL), _bounds(DAY, DAY)).scalars().all()
        # a week's own copy of the index has a name of its own: its predicate tells
        used = [line.split(" using ")[1].split()[0] for line in plan if " using " in line]
        predicates = [conn.execute(text("SELECT pg_get_expr(indpred, indrelid) FROM pg_index"
                                        " WHERE indexrelid = to_regclass(:n)"), {"n": n}).scalar()
                      for n in used]  # fmt: skip
    assert used and all(p == "(web_search_calls > 0)" for p in predicates), plan
