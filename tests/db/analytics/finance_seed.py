"""A small ledger for the finance tests, priced by the config's real catalog, with its
figures worked out by hand (list prices per 1M tokens: gpt-4.1 $2.00 in, $0.50 cached,
$8.00 out; deepseek-v3.2 $0.28 / $0.028 / $0.42; claude-haiku-4.5 $1.00 / $0.10 / $5.00;
the relay bills ¥1 per $1 of list price at ¥7.3 per $1, its DeepSeek at ¥2.50 / ¥3.80)."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, insert, null, text

from db.models import UsageRow
from db.price_sync import sync_prices
from gateway.domain.config import Config
from gateway.domain.pricing import PriceCatalog, TokenUsage

DAY2, DAY3 = dt.date(2026, 11, 2), dt.date(2026, 11, 3)
KEY_CHECKOUT = uuid.UUID("11111111-1111-1111-1111-111111111111")
KEY_BOT = uuid.UUID("22222222-2222-2222-2222-222222222222")
M = 1_000_000
D = Decimal

# what the seeded rows cost, in USD, by hand (actual; list in parentheses)
CHECKOUT_DEEPSEEK = D("0.4396")  # 2 × (400k in, 100k cached, 250k out) on deepseek-v3.2
BOT_GPT41 = D("10.00")  # 1M in, 1M out on gpt-4.1
RELAY_GPT41 = D("1.3698630137")  # ¥10 at 7.3 (list $10.00, ¥73.00)
RELAY_DEEPSEEK = D("0.8630136986")  # ¥6.30 at 7.3 (list $0.70, ¥5.11)
HAIKU = D("1.50")  # 1M in, 100k out on claude-haiku-4.5
LEDGER_ACTUAL_USD = CHECKOUT_DEEPSEEK + BOT_GPT41 + RELAY_GPT41 + RELAY_DEEPSEEK + HAIKU
# the cache hit's list cost counts (1M in on gpt-4.1: $2.00), it billed nothing
LEDGER_LIST_USD = CHECKOUT_DEEPSEEK + D("10.00") + D("10.00") + D("0.70") + HAIKU + D("2.00")


def _row(
    catalog: PriceCatalog,
    at: dt.datetime | None,
    day: dt.date,
    app: str,
    key: uuid.UUID,
    model: str,
    usage: TokenUsage,
    alias: str | None = None,
    cache_hit: bool = False,
    end_user: str | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    v = catalog.versions[model]
    priced = catalog.price(model, usage)
    started = at or dt.datetime.combine(day, dt.time(12), dt.UTC)
    return {
        "request_id": uuid.uuid4(),
        "started_at": started,
        "ended_at": started + dt.timedelta(seconds=1),
        "app": app,
        "team": "payments" if app == "checkout" else "support",
        "key_id": key,
        "requested_model": alias or model,
        "alias": alias,
        "model": model,
        "provider": v.provider,
        "stream": False,
        "status": "ok",
        "http_status": 200,
        "prompt_tokens": usage.prompt_tokens,
        "cached_prompt_tokens": usage.cached_prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "reasoning_tokens": 0,
        "usage_source": "provider",
        "latency_ms": 900,
        "attempts": 1,
        "fallback_path": [model],
        "price_version_id": priced.price_version_id,
        "billing_currency": priced.billing_currency,
        "actual_cost": D(0) if cache_hit else priced.actual_cost,
        "actual_cost_usd": D(0) if cache_hit else priced.actual_cost_usd,
        "list_cost_usd": priced.list_cost_usd,
        "cache_hit": cache_hit,
        "end_user": end_user,
        # SQL NULL, not JSON null: the JSONB column stores None as 'null' otherwise
        "tags": null() if tags is None else tags,
    }


def seed_finance_ledger(engine: Engine, cfg: Config, at: dt.datetime | None = None) -> None:
    """The rows below on DAY2 and DAY3, or all at `at` (a browser test seeds a few
    minutes ago, inside whatever period the dashboard opens on)."""
    sync_prices(engine, cfg)
    catalog = PriceCatalog.from_config(cfg)
    deepseek = TokenUsage(prompt_tokens=500_000, cached_prompt_tokens=100_000,
                          completion_tokens=250_000)  # fmt: skip
    one_one = TokenUsage(prompt_tokens=M, completion_tokens=M)
    ds = dict(catalog=catalog, at=at, app="checkout", key=KEY_CHECKOUT)
    bot = dict(catalog=catalog, at=at, app="bot", key=KEY_BOT)
    rows = [
        # one group of the rollup, two end users and two feature tags (FOCUS --split-by)
        _row(**ds, day=DAY2, model="deepseek-v3.2", usage=deepseek, alias="auto",
             end_user="u-a", tags={"feature": "search"}),
        _row(**ds, day=DAY2, model="deepseek-v3.2", usage=deepseek, alias="auto",
             end_user="u-b", tags={"feature": "chat", "env": "prod"}),
        _row(**bot, day=DAY2, model="gpt-4.1", usage=one_one, end_user="u-a"),
        _row(**ds, day=DAY2, model="gpt-4.1", usage=TokenUsage(prompt_tokens=M), cache_hit=True),
        _row(**bot, day=DAY3, model="relay-gpt-4.1", usage=one_one),
        _row(**bot, day=DAY3, model="relay-deepseek-v3.2", usage=one_one),
        _row(**bot, day=DAY3, model="claude-haiku-4.5",
             usage=TokenUsage(prompt_tokens=M, completion_tokens=100_000)),
    ]  # fmt: skip
    failed = dict(rows[2], request_id=uuid.uuid4(), status="upstream_error", http_status=502,
                  prompt_tokens=None, completion_tokens=None, cached_prompt_tokens=None,
                  usage_source="missing", price_version_id=None, billing_currency=None,
                  actual_cost=None, actual_cost_usd=None, list_cost_usd=None)  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(UsageRow), [*rows, failed])


def clean_finance_tables(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE fx_rates, invoice_lines, price_versions"))
