"""Hand-made usage records for the dashboard's tests (plain data, no I/O)."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource

T0 = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.UTC)
PV = uuid.UUID("00000000-0000-0000-0000-0000000000aa")


def record(**overrides: Any) -> UsageRecord:
    base: dict[str, Any] = dict(
        request_id=uuid.uuid4(),
        started_at=T0,
        ended_at=T0 + dt.timedelta(milliseconds=500),
        app="search",
        team="platform",
        key_id=None,
        requested_model="auto",
        alias="auto",
        model="deepseek-v3.2",
        provider="deepseek",
        stream=False,
        status=RequestStatus.OK,
        http_status=200,
        error_class=None,
        prompt_tokens=1000,
        cached_prompt_tokens=200,
        completion_tokens=100,
        reasoning_tokens=0,
        usage_source=UsageSource.PROVIDER,
        latency_ms=500,
        ttft_ms=None,
        upstream_latency_ms=490,
        attempts=1,
        fallback_path=("deepseek-v3.2",),
        routing_policy="weighted",
        price_version_id=PV,
        billing_currency="USD",
        actual_cost=Decimal("0.0010000000"),
        actual_cost_usd=Decimal("0.0010000000"),
        list_cost_usd=Decimal("0.0012000000"),
        baseline_model="gpt-4.1",
        baseline_cost_usd=Decimal("0.0100000000"),
    )
    base.update(overrides)
    return UsageRecord(**base)


def failed(**overrides: Any) -> UsageRecord:
    """An upstream failure: no usage, so no cost (NULL, not 0)."""
    values: dict[str, Any] = dict(
        status=RequestStatus.UPSTREAM_ERROR,
        http_status=502,
        error_class="upstream_5xx",
        prompt_tokens=None,
        cached_prompt_tokens=None,
        completion_tokens=None,
        reasoning_tokens=None,
        usage_source=UsageSource.MISSING,
        price_version_id=None,
        billing_currency=None,
        actual_cost=None,
        actual_cost_usd=None,
        list_cost_usd=None,
        baseline_model=None,
        baseline_cost_usd=None,
    )
    values.update(overrides)
    return record(**values)


def frame(records: list[UsageRecord]) -> Any:
    import dataclasses

    import pandas as pd

    return pd.DataFrame([dataclasses.asdict(r) for r in records])
