from __future__ import annotations

import time
import uuid
from decimal import Decimal

from gateway.domain.config import load_config
from gateway.domain.pricing import PriceCatalog, TokenUsage
from gateway.domain.usage_record import RequestStatus, UsageSource
from gateway.replica.auth import Caller
from gateway.replica.cache.entry import CacheEntry
from gateway.replica.cache.hit_record import hit_record
from gateway.replica.exchange import Exchange, utcnow
from tests.fixtures.sim import EXAMPLE_CONFIG


def test_a_hit_costs_zero_and_is_priced_at_list_as_if_served() -> None:
    cfg = load_config(EXAMPLE_CONFIG)
    catalog = PriceCatalog.from_config(cfg)
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=200)
    ex = Exchange(uuid.uuid4(), time.perf_counter(), utcnow(), Caller("app", None, None), "gpt-4o")
    ex.model = cfg.models_by_name["gpt-4o"]
    entry = CacheEntry("gpt-4o", time.time(), usage, UsageSource.PROVIDER, body={})
    record = hit_record(ex, cfg, catalog, entry)
    served = catalog.price("gpt-4o", usage)
    assert record.cache_hit and record.status is RequestStatus.OK and record.attempts == 0
    assert record.actual_cost_usd == Decimal(0) == record.actual_cost
    assert record.list_cost_usd == served.list_cost_usd > 0
    assert (record.prompt_tokens, record.completion_tokens) == (1000, 200)
    assert record.usage_source is UsageSource.PROVIDER
    assert record.model == "gpt-4o" and record.provider == ex.model.provider
