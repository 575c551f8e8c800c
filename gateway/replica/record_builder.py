"""The usage record of one request: who, what, how long, how many tokens, what it cost.

Pure: it reads the exchange, prices its usage with the catalog, and returns the record.
A model without a price gives a record whose costs are unknown (NULL), never $0.
"""

from __future__ import annotations

from gateway.domain.config import Config
from gateway.domain.pricing import PriceCatalog, PriceUnavailable
from gateway.domain.usage_record import (
    RequestStatus,
    UsageRecord,
    UsageSource,
    measured_fields,
)
from gateway.quality.signals import NO_SIGNALS
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
    sig = ex.signals if status is RequestStatus.OK else NO_SIGNALS
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
        usage_source=accounted.source if ex.attempts else UsageSource.MISSING,
        latency_ms=ex.elapsed_ms(),
        ttft_ms=ex.ttft_ms,
        upstream_latency_ms=ex.upstream_ms,
        attempts=ex.attempts,
        fallback_path=tuple(ex.path),
        routing_policy=ex.plan.policy if ex.plan else None,
        endpoint=ex.endpoint,
        trimmed_tokens=ex.trimmed_tokens,
        end_user=ex.attribution.end_user,
        session_id=ex.attribution.session_id,
        tags=None if ex.attribution.tags is None else dict(ex.attribution.tags),
        finish_reason=sig.finish_reason,
        refusal=sig.refusal,
        json_valid=sig.json_valid,
        tool_args_valid=sig.tool_args_valid,
        experiment=ex.experiment[0] if ex.experiment else None,
        variant=ex.experiment[1] if ex.experiment else None,
        **measured_fields(usage, priced, baseline),
    )
