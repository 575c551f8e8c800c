"""The ledger row of a request answered from the cache. Pure.

It is the request's own row (its app, key, timings) marked `cache_hit`, with an actual
cost of 0 and its list and baseline cost priced on the entry's model and tokens as if it
had been served: the difference is what the cache saved, counted as "cache" savings.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from gateway.domain.config import Config
from gateway.domain.pricing import PriceCatalog, PriceUnavailable
from gateway.domain.usage_record import RequestStatus, UsageRecord
from gateway.replica.cache.entry import CacheEntry
from gateway.replica.exchange import Exchange
from gateway.replica.record_builder import build_record
from gateway.replica.usage_accounting import Accounted

ZERO = Decimal(0)


def hit_record(
    ex: Exchange,
    cfg: Config,
    catalog: PriceCatalog,
    entry: CacheEntry,
    status: RequestStatus = RequestStatus.OK,
    http_status: int = 200,
    error_class: str | None = None,
) -> UsageRecord:
    accounted = Accounted(entry.usage, entry.usage_source)
    base = build_record(ex, cfg, catalog, status, http_status, error_class, accounted)
    baseline = cfg.aliases[base.alias].baseline if base.alias else None
    priced = None
    if entry.usage is not None:
        try:
            priced = catalog.price(entry.model, entry.usage, baseline_model=baseline)
        except PriceUnavailable:
            priced = None  # its list price is unknown; what it cost us is still 0
    return dataclasses.replace(
        base,
        usage_source=entry.usage_source,
        cache_hit=True,
        price_version_id=priced.price_version_id if priced else None,
        billing_currency=priced.billing_currency if priced else None,
        actual_cost=ZERO,
        actual_cost_usd=ZERO,
        list_cost_usd=priced.list_cost_usd if priced else None,
        baseline_model=baseline if priced else None,
        baseline_cost_usd=priced.baseline_cost_usd if priced else None,
    )
