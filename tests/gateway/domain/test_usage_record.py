"""A usage record travels as a JSON line (the spool) and comes back equal, old lines too."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource

T0 = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def _record(**overrides: object) -> UsageRecord:
    fields: dict[str, object] = {
        "request_id": uuid.uuid4(), "started_at": T0, "ended_at": T0, "app": "a",
        "team": None, "key_id": None, "requested_model": "text-embedding-3-small",
        "alias": None, "model": "text-embedding-3-small", "provider": "openai",
        "stream": False, "status": RequestStatus.OK, "http_status": 200, "error_class": None,
        "prompt_tokens": 12, "cached_prompt_tokens": 0, "completion_tokens": 0,
        "reasoning_tokens": 0, "usage_source": UsageSource.PROVIDER, "latency_ms": 3,
        "ttft_ms": None, "upstream_latency_ms": 2, "attempts": 1, "fallback_path": ("x",),
        "routing_policy": "fixed", "price_version_id": None, "billing_currency": "USD",
        "actual_cost": Decimal("0.00000024"), "actual_cost_usd": Decimal("0.00000024"),
        "list_cost_usd": Decimal("0.00000024"), "baseline_model": None,
        "baseline_cost_usd": None,
    }
    fields.update(overrides)
    return UsageRecord(**fields)  # type: ignore[arg-type]


def test_a_record_with_its_endpoint_and_cache_writes_round_trips_through_json() -> None:
    r = _record(endpoint=Endpoint.EMBEDDINGS, cache_write_tokens=7)
    back = UsageRecord.from_json(r.to_json())
    assert back == r and back.endpoint is Endpoint.EMBEDDINGS
    assert json.loads(r.to_json())["endpoint"] == "embeddings"


def test_a_spool_line_written_before_the_endpoint_existed_loads_as_chat() -> None:
    line = json.loads(_record().to_json())
    del line["endpoint"], line["cache_write_tokens"]
    back = UsageRecord.from_dict(line)
    assert back.endpoint is Endpoint.CHAT_COMPLETIONS and back.cache_write_tokens is None


def test_the_journal_line_says_what_to_dict_says_and_keeps_decimals_exact() -> None:
    r = _record(actual_cost=Decimal("0.000000240000000000001"), app="café",
                started_at=T0.replace(microsecond=123456))  # fmt: skip
    line = r.to_json_bytes()
    assert json.loads(line) == r.to_dict()
    cost = json.loads(line)["actual_cost"]
    assert isinstance(cost, str) and Decimal(cost) == r.actual_cost  # a string, never a float
    assert UsageRecord.from_json(line) == r


def test_a_lone_surrogate_from_a_client_still_makes_a_line() -> None:
    # a JSON body may spell "\ud800" as the model: the refusal's row must still be written
    r = _record(requested_model="gpt-\ud800")
    line = r.to_json_bytes()
    line.decode("ascii")  # escaped as json escapes it, so the file stays valid UTF-8
    assert UsageRecord.from_json(line) == r
