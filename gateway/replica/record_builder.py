"""The usage record of one request: who, what, how long, how many tokens, what it cost.

Pure: it reads the exchange, prices its usage with the catalog, and returns the record.
A model without a price gives a record whose costs are unknown (NULL), never $0.
"""

from __future__ import annotations

from gateway.domain.config import Config
from gateway.domain.pricing import PriceCatalog, PriceUnavailable
from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource
from gateway.replica.exchange import Exchange, utcnow
from gateway.replica.usage_accounting import Accounted


def ledger_text(value: str) -> str:
    """Text as PostgreSQL stores it: NUL cannot be stored (and would fail the whole
    batch's COPY), so it is dropped; an upstream's error code is not ours to trust."""
    return value.replace("\x00", "") if "\x00" in value else value


def build_record(
    ex: Exchange,
    cfg: Config,
    catalog: PriceCatalog,
    status: RequestStatus,
    http_status: int,
    error_class: str | None,
    accounted: Accounted,
) -> UsageRecord:
    """The ledger row of one request, priced with the catalog's current versions."""
    alias = ex.requested if ex.requested in cfg.aliases else None
    baseline = cfg.aliases[alias].baseline if alias else None
    model = ex.model
    priced = None
    if model is not None and accounted.usage is not None and ex.attempts:
        try:
            priced = catalog.price(model.name, accounted.usage, baseline_model=baseline)
        except PriceUnavailable:
            priced = None  # an unpriced model: its cost stays unknown, never $0
    usage = accounted.usage
    return UsageRecord(
        request_id=ex.request_id,
        started_at=ex.started_at,
        ended_at=utcnow(),
        app=ex.caller.app,
        team=ex.caller.team,
        key_id=ex.caller.key_id,
        requested_model=ledger_text(ex.requested)[:200],
        alias=alias,
        model=model.name if model else None,
        provider=model.provider if model else None,
        stream=ex.stream,
        status=status,
        http_status=http_status,
        error_class=None if error_class is None else ledger_text(error_class)[:200],
        prompt_tokens=usage.prompt_tokens if usage else None,
        cached_prompt_tokens=usage.cached_prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        reasoning_tokens=usage.reasoning_tokens if usage else None,
        usage_source=accounted.source if ex.attempts else UsageSource.MISSING,
        latency_ms=ex.elapsed_ms(),
        ttft_ms=ex.ttft_ms,
        upstream_latency_ms=ex.upstream_ms,
        attempts=ex.attempts,
        fallback_path=tuple(ex.path),
        routing_policy=ex.plan.policy if ex.plan else None,
        price_version_id=priced.price_version_id if priced else None,
        billing_currency=priced.billing_currency if priced else None,
        actual_cost=priced.actual_cost if priced else None,
        actual_cost_usd=priced.actual_cost_usd if priced else None,
        list_cost_usd=priced.list_cost_usd if priced else None,
        baseline_model=baseline if priced else None,
        baseline_cost_usd=priced.baseline_cost_usd if priced else None,
        endpoint=ex.endpoint,
        cache_write_tokens=usage.cache_write_tokens if usage else None,
        trimmed_tokens=ex.trimmed_tokens,
    )
