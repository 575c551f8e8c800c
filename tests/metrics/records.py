"""Usage records for metrics tests: a realistic default, any field overridable."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource

_T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


def make_record(**overrides: Any) -> UsageRecord:
    fields: dict[str, Any] = {
        "request_id": uuid.uuid4(),
        "started_at": _T0,
        "ended_at": _T0 + dt.timedelta(milliseconds=900),
        "app": "billing",
        "team": None,
        "key_id": None,
        "requested_model": "auto",
        "alias": "auto",
        "model": "deepseek-v3.2",
        "provider": "deepseek",
        "stream": False,
        "status": RequestStatus.OK,
        "http_status": 200,
        "error_class": None,
        "prompt_tokens": 100,
        "cached_prompt_tokens": 20,
        "completion_tokens": 50,
        "reasoning_tokens": None,
        "usage_source": UsageSource.PROVIDER,
        "latency_ms": 900,
        "ttft_ms": None,
        "upstream_latency_ms": 880,
        "attempts": 1,
        "fallback_path": ("deepseek-v3.2",),
        "routing_policy": "weighted",
        "price_version_id": None,
        "billing_currency": "USD",
        "actual_cost": Decimal("0.0000512"),
        "actual_cost_usd": Decimal("0.0000512"),
        "list_cost_usd": Decimal("0.0000512"),
        "baseline_model": "gpt-4.1",
        "baseline_cost_usd": Decimal("0.00058"),
    }
    fields.update(overrides)
    return UsageRecord(**fields)
